#include "ckpt/hf_gpt2.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/json_document.h"
#include "ops/elementwise.h"

namespace mds::ckpt {

namespace {

using model::GptConfig;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// One GPT-2 tensor and where it comes from in the pipe model. The QKV and Conv1D transforms are
// below; everything else is copied as is.
enum class Transform { kCopy, kTranspose, kQkvWeight, kQkvBias };
struct Mapping {
  std::string hf;      // without the "transformer." prefix
  std::int64_t layer;  // pipe spec
  std::string name;    // key in the layer file
  Transform transform;
};

std::vector<Mapping> mappings(const GptConfig& c) {
  std::vector<Mapping> out = {
      {"wte.weight", GptConfig::kEmbeddingSpec, "word_embeddings.weight", Transform::kCopy},
      {"wpe.weight", GptConfig::kEmbeddingSpec, "position_embeddings.weight", Transform::kCopy},
  };
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    const std::int64_t spec = GptConfig::layer_spec(i);
    const std::vector<Mapping> layer = {
        {h + "ln_1.weight", spec, "input_layernorm.weight", Transform::kCopy},
        {h + "ln_1.bias", spec, "input_layernorm.bias", Transform::kCopy},
        {h + "attn.c_attn.weight", spec, "self_attention.query_key_value.weight",
         Transform::kQkvWeight},
        {h + "attn.c_attn.bias", spec, "self_attention.query_key_value.bias", Transform::kQkvBias},
        {h + "attn.c_proj.weight", spec, "self_attention.dense.weight", Transform::kTranspose},
        {h + "attn.c_proj.bias", spec, "self_attention.dense.bias", Transform::kCopy},
        {h + "ln_2.weight", spec, "post_attention_layernorm.weight", Transform::kCopy},
        {h + "ln_2.bias", spec, "post_attention_layernorm.bias", Transform::kCopy},
        {h + "mlp.c_fc.weight", spec, "mlp.dense_h_to_4h.weight", Transform::kTranspose},
        {h + "mlp.c_fc.bias", spec, "mlp.dense_h_to_4h.bias", Transform::kCopy},
        {h + "mlp.c_proj.weight", spec, "mlp.dense_4h_to_h.weight", Transform::kTranspose},
        {h + "mlp.c_proj.bias", spec, "mlp.dense_4h_to_h.bias", Transform::kCopy},
    };
    out.insert(out.end(), layer.begin(), layer.end());
  }
  out.push_back({"ln_f.weight", c.final_layernorm_spec(), "weight", Transform::kCopy});
  out.push_back({"ln_f.bias", c.final_layernorm_spec(), "bias", Transform::kCopy});
  return out;
}

// Megatron's fused QKV row (head·3 + t)·hn + d is GPT-2's column t·h + head·hn + d.
std::int64_t qkv_hf_index(std::int64_t megatron_row, const GptConfig& c) {
  const std::int64_t hn = c.head_dim(), head = megatron_row / (3 * hn);
  const std::int64_t t = megatron_row / hn % 3, d = megatron_row % hn;
  return t * c.hidden_size + head * hn + d;
}

Shape hf_shape(const Mapping& m, const Shape& ours, std::int64_t vocab_rows) {
  switch (m.transform) {
    case Transform::kTranspose:
    case Transform::kQkvWeight:
      return Shape{ours[1], ours[0]};
    default:
      if (m.name == "word_embeddings.weight") return Shape{vocab_rows, ours[1]};
      return ours;
  }
}

// hf (fp32, hf_shape) from ours (fp32, the table's shape), or back when `to_hf` is false.
void convert(const Mapping& m, const GptConfig& c, float* ours, float* hf, std::int64_t rows,
             std::int64_t cols, bool to_hf) {
  const auto move = [to_hf](float& our, float& their) {
    if (to_hf) {
      their = our;
    } else {
      our = their;
    }
  };
  switch (m.transform) {
    case Transform::kCopy:
      for (std::int64_t i = 0; i < rows * cols; ++i) move(ours[i], hf[i]);
      break;
    case Transform::kTranspose:  // ours [rows, cols], GPT-2's Conv1D [cols, rows]
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < cols; ++k) move(ours[r * cols + k], hf[k * rows + r]);
      }
      break;
    case Transform::kQkvWeight:  // ours [3h, h] → GPT-2 [h, 3h]
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t column = qkv_hf_index(r, c);
        for (std::int64_t k = 0; k < cols; ++k) move(ours[r * cols + k], hf[k * rows + column]);
      }
      break;
    case Transform::kQkvBias:
      for (std::int64_t r = 0; r < rows; ++r) move(ours[r], hf[qkv_hf_index(r, c)]);
      break;
  }
}

std::string activation_name(ops::GeluKind gelu) {
  switch (gelu) {
    case ops::GeluKind::kTanhFused:
      return "gelu_fast";
    case ops::GeluKind::kTanhOpenAI:
      return "gelu_new";
    case ops::GeluKind::kErf:
      return "gelu";
  }
  return "gelu_new";
}

// The shortest decimal that reads back as the same float (Python prints the flags' 0.1 as 0.1,
// not as the float's 0.10000000149011612).
std::string number(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (static_cast<float>(std::strtod(text, nullptr)) == static_cast<float>(value)) break;
  }
  return text;
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

}  // namespace

void check_gpt2_compatible(const model::ModelOptions& options) {
  const GptConfig& c = options.config;
  const auto refuse = [](const char* what) {
    base::fail("Hugging Face GPT-2 cannot express ", what);
  };
  if (c.position_embedding != model::PositionEmbedding::kAbsolute) {
    refuse("rotary or ALiBi positions (GPT-2 has absolute positions)");
  }
  if (c.embed_layernorm) refuse("--embed-layernorm");
  if (c.glu) refuse("--glu-activation");
  if (options.apply_residual_connection_post_layernorm) {
    refuse("--apply-residual-connection-post-layernorm");
  }
  if (c.tensor_parallel_size != 1 || c.stage_first_spec != 0 || c.stage_end_spec >= 0) {
    base::fail("to_hf_gpt2: the model must be whole (T = P = 1); merge the shards first");
  }
}

HfGpt2Config hf_gpt2_config(const model::ModelOptions& options, std::int64_t vocab_rows,
                            DType dtype) {
  check_gpt2_compatible(options);
  const GptConfig& c = options.config;
  HfGpt2Config h;
  h.vocab_size = vocab_rows;
  h.n_positions = c.max_position_embeddings;
  h.n_embd = c.hidden_size;
  h.n_layer = c.num_layers;
  h.n_head = c.num_attention_heads;
  h.n_inner = c.ffn_hidden_size;
  h.layer_norm_epsilon = options.layernorm_epsilon;
  h.initializer_range = c.init_method_std;
  h.resid_pdrop = h.embd_pdrop = options.hidden_dropout;
  h.attn_pdrop = options.attention_dropout;
  h.activation_function = activation_name(options.gelu);
  h.torch_dtype = std::string(tensor::dtype_name(dtype));
  return h;
}

std::string hf_gpt2_config_json(const HfGpt2Config& h) {
  std::string j = "{\n";
  const auto field = [&j](const char* key, const std::string& value, bool last = false) {
    j += "  \"" + std::string(key) + "\": " + value + (last ? "\n" : ",\n");
  };
  const auto text = [](const std::string& s) { return "\"" + s + "\""; };
  field("activation_function", text(h.activation_function));
  field("architectures", "[\n    \"GPT2LMHeadModel\"\n  ]");
  field("attn_pdrop", number(h.attn_pdrop));
  field("bos_token_id", "50256");
  field("embd_pdrop", number(h.embd_pdrop));
  field("eos_token_id", "50256");
  field("initializer_range", number(h.initializer_range));
  field("layer_norm_epsilon", number(h.layer_norm_epsilon));
  field("model_type", text("gpt2"));
  field("n_embd", std::to_string(h.n_embd));
  field("n_head", std::to_string(h.n_head));
  field("n_inner", h.n_inner > 0 ? std::to_string(h.n_inner) : "null");
  field("n_layer", std::to_string(h.n_layer));
  field("n_positions", std::to_string(h.n_positions));
  field("reorder_and_upcast_attn", "false");
  field("resid_pdrop", number(h.resid_pdrop));
  field("scale_attn_by_inverse_layer_idx", "false");
  field("scale_attn_weights", "true");
  field("summary_activation", "null");
  field("summary_first_dropout", "0.1");
  field("summary_proj_to_labels", "true");
  field("summary_type", text("cls_index"));
  field("summary_use_proj", "true");
  field("torch_dtype", text(h.torch_dtype));
  field("use_cache", "true");
  field("vocab_size", std::to_string(h.vocab_size), true);
  return j + "}\n";
}

HfGpt2Config read_hf_gpt2_config(const std::string& path) {
  const config::JsonValue root = config::parse_json(base::read_file(path), path);
  if (!root.is_object()) base::fail(path, ": not a JSON object");
  const auto get = [&](const char* key) -> const config::JsonValue* { return root.find(key); };
  const auto integer = [&](const char* key, bool required) -> std::int64_t {
    const config::JsonValue* v = get(key);
    if (v == nullptr || v->is_null()) {
      if (required) base::fail(path, ": '", key, "' is missing");
      return 0;
    }
    if (!v->is_int64() || v->as_int64() <= 0)
      base::fail(path, ": '", key, "' must be a positive integer");
    return v->as_int64();
  };
  const auto real = [&](const char* key, double fallback) {
    const config::JsonValue* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) base::fail(path, ": '", key, "' must be a number");
    return v->as_double();
  };
  const config::JsonValue* type = get("model_type");
  if (type == nullptr || !type->is_string() || type->as_string() != "gpt2") {
    base::fail(path, ": model_type must be \"gpt2\"");
  }
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    const config::JsonValue* v = get(key);
    if (v != nullptr && v->is_bool() && v->as_bool()) {
      base::fail(path, ": '", key, "' true is not a Megatron GPT model");
    }
  }
  HfGpt2Config h;
  h.vocab_size = integer("vocab_size", true);
  h.n_positions = integer("n_positions", true);
  h.n_embd = integer("n_embd", true);
  h.n_layer = integer("n_layer", true);
  h.n_head = integer("n_head", true);
  h.n_inner = integer("n_inner", false);
  h.layer_norm_epsilon = real("layer_norm_epsilon", 1e-5);
  h.initializer_range = real("initializer_range", 0.02);
  h.resid_pdrop = real("resid_pdrop", 0.1);
  h.embd_pdrop = real("embd_pdrop", 0.1);
  h.attn_pdrop = real("attn_pdrop", 0.1);
  if (const config::JsonValue* v = get("activation_function")) {
    if (!v->is_string()) base::fail(path, ": 'activation_function' must be a string");
    h.activation_function = v->as_string();
  }
  if (const config::JsonValue* v = get("torch_dtype"); v != nullptr && v->is_string()) {
    h.torch_dtype = v->as_string();
  }
  return h;
}

HfTensors to_hf_gpt2(const GptConfig& config, const model::ParamBuffer& whole,
                     std::int64_t vocab_rows, DType dtype) {
  const model::ParamTable& table = whole.table();
  if (whole.flat().dtype() != DType::kFloat32) base::fail("to_hf_gpt2: weights must be fp32");
  if (vocab_rows < 1 || vocab_rows > config.padded_vocab_size) {
    base::fail("to_hf_gpt2: ", vocab_rows, " vocabulary rows asked for, the model has ",
               config.padded_vocab_size);
  }
  HfTensors out;
  std::vector<float> scratch;
  for (const Mapping& m : mappings(config)) {
    const Tensor ours = whole.view(table.index_of(m.layer, m.name));
    const Shape& shape = ours.shape();
    const Shape target = hf_shape(m, shape, vocab_rows);
    const std::int64_t rows = shape[0], cols = shape.rank() > 1 ? shape[1] : 1;
    scratch.assign(static_cast<std::size_t>(rows * cols), 0.0f);
    convert(m, config, static_cast<float*>(ours.raw()), scratch.data(), rows, cols, true);
    tensor::Buffer& buffer = out.storage.emplace_back(
        static_cast<std::size_t>(target.numel()) * tensor::dtype_size(dtype), tensor::Device{});
    const Tensor converted = buffer.as(dtype, target);
    // The word embedding keeps its first vocab_rows rows: a prefix of the row-major data.
    ops::cast(converted, Tensor(scratch.data(), DType::kFloat32, target));
    out.tensors.push_back({"transformer." + m.hf, converted});
  }
  return out;
}

void from_hf_gpt2(const HfWeights& weights, const GptConfig& config,
                  const model::ParamBuffer& whole) {
  const model::ParamTable& table = whole.table();
  if (whole.flat().dtype() != DType::kFloat32) base::fail("from_hf_gpt2: weights must be fp32");
  // A stored head must be the tied word embedding: an untied one has no place in the model.
  if (const HfWeight* head = weights.find("lm_head.weight")) {
    const HfWeight* wte = weights.find("transformer.wte.weight");
    if (wte == nullptr || head->bytes != wte->bytes || head->dtype != wte->dtype) {
      base::fail(head->file,
                 ": lm_head.weight differs from transformer.wte.weight; an untied "
                 "head cannot be imported (Megatron's GPT ties them)");
    }
  }
  std::vector<float> scratch;
  for (const Mapping& m : mappings(config)) {
    const HfWeight* entry = weights.find("transformer." + m.hf);
    if (entry == nullptr) entry = weights.find(m.hf);
    if (entry == nullptr) base::fail(weights.source(), ": no tensor 'transformer.", m.hf, "'");
    const Tensor ours = whole.view(table.index_of(m.layer, m.name));
    const Shape& shape = ours.shape();
    const bool vocab = m.name == "word_embeddings.weight";
    const std::int64_t rows = shape[0], cols = shape.rank() > 1 ? shape[1] : 1;
    const std::int64_t file_rows = vocab && entry->shape.size() == 2 ? entry->shape[0] : rows;
    const Shape expected = hf_shape(m, shape, file_rows);
    if (entry->shape != std::vector<std::int64_t>(expected.begin(), expected.end()) ||
        file_rows > rows) {
      base::fail(entry->file, ": tensor '", entry->name, "' has shape ", dims_text(entry->shape),
                 ", the model needs ", hf_shape(m, shape, rows).to_string(),
                 vocab ? " (or fewer rows)" : "");
    }
    scratch.assign(static_cast<std::size_t>(rows * cols), 0.0f);
    ops::cast(Tensor(scratch.data(), DType::kFloat32, expected),
              Tensor(const_cast<char*>(entry->bytes.data()), entry->dtype, expected));
    convert(m, config, static_cast<float*>(ours.raw()), scratch.data(), rows, cols, false);
  }
}

}  // namespace mds::ckpt
