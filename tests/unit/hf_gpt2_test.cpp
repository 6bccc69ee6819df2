// ckpt/hf_gpt2.h: the Megatron ↔ GPT-2 tensor mapping of checkpoints.md §6.3 on a tiny model.
#include "ckpt/hf_gpt2.h"

#include <gtest/gtest.h>

#include <string>

#include "model/param_table.h"

namespace mds::ckpt {
namespace {

model::GptConfig tiny_config() {
  model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.seq_length = 4;
  c.max_position_embeddings = 4;
  c.padded_vocab_size = 16;
  return c;
}

const io::NamedTensor& named(const HfTensors& t, const std::string& name) {
  for (const io::NamedTensor& n : t.tensors) {
    if (n.name == name) return n;
  }
  throw std::runtime_error("no " + name);
}

float at(const tensor::Tensor& t, std::int64_t i) {
  return static_cast<const float*>(t.raw())[i];
}

TEST(HfGpt2, QkvRowsBecomeQThenKThenVColumnsAndConv1DWeightsAreTransposed) {
  const model::GptConfig c = tiny_config();
  const model::ParamTable table = model::ParamTable::build(c);
  const model::ParamBuffer whole(table, tensor::DType::kFloat32);
  float value = 0.0f;
  for (std::size_t p = 0; p < table.size(); ++p) {
    for (float& x : whole.view(p).host_span<float>()) x = value++;
  }
  const HfTensors hf = to_hf_gpt2(c, whole, 12, tensor::DType::kFloat32);
  EXPECT_EQ(hf.tensors.size(), 2u + 12u * 2u + 2u);  // wte, wpe, 12 per layer, ln_f

  const std::int64_t h = 8, hn = 4;
  const tensor::Tensor qkv = whole.view(table.index_of(3, "self_attention.query_key_value.weight"));
  const tensor::Tensor c_attn = named(hf, "transformer.h.0.attn.c_attn.weight").tensor;
  ASSERT_EQ(c_attn.shape(), (tensor::Shape{h, 3 * h}));
  for (std::int64_t head = 0; head < 2; ++head) {
    for (std::int64_t t = 0; t < 3; ++t) {
      for (std::int64_t d = 0; d < hn; ++d) {
        for (std::int64_t k = 0; k < h; ++k) {
          EXPECT_EQ(at(c_attn, k * 3 * h + t * h + head * hn + d),
                    at(qkv, ((head * 3 + t) * hn + d) * h + k));
        }
      }
    }
  }
  const tensor::Tensor fc = named(hf, "transformer.h.1.mlp.c_fc.weight").tensor;
  const tensor::Tensor h_to_4h = whole.view(table.index_of(4, "mlp.dense_h_to_4h.weight"));
  ASSERT_EQ(fc.shape(), (tensor::Shape{h, 4 * h}));
  EXPECT_EQ(at(fc, 3 * 4 * h + 17), at(h_to_4h, 17 * h + 3));
  // The word embedding keeps its first 12 rows; ln_f is the final LayerNorm (spec L+4).
  EXPECT_EQ(named(hf, "transformer.wte.weight").tensor.shape(), (tensor::Shape{12, h}));
  EXPECT_EQ(at(named(hf, "transformer.ln_f.bias").tensor, 0),
            at(whole.view(table.index_of(6, "bias")), 0));
}

TEST(HfGpt2, ConfigJsonNamesTheShapesAndTheGelu) {
  model::ModelOptions options;
  options.config = tiny_config();
  options.gelu = ops::GeluKind::kErf;
  const std::string json =
      hf_gpt2_config_json(hf_gpt2_config(options, 16, tensor::DType::kBFloat16));
  for (const char* expected :
       {"\"activation_function\": \"gelu\",", "\"n_embd\": 8,", "\"n_inner\": null,",
        "\"torch_dtype\": \"bfloat16\",", "\"vocab_size\": 16\n", "\"model_type\": \"gpt2\","}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << "\n" << json;
  }
  options.config.glu = true;
  EXPECT_THROW(hf_gpt2_config(options, 16, tensor::DType::kFloat32), std::exception);
}

}  // namespace
}  // namespace mds::ckpt
