// GptModel with bf16/fp16 activations on the host against the fp32 model on the same (16-bit
// representable) weights: the only difference is the rounding of each activation to 16 bits. And
// the 16-bit model reading every parameter from the 16-bit weights (no fp32 compute copy, as the
// trainer runs it) against reading the non-GEMM ones from the compute copy: bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/activation_plan.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "ops/elementwise.h"

namespace mds::model {
namespace {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

ModelOptions tiny_options(DType activations) {
  ModelOptions o;
  o.config.num_layers = 3;
  o.config.hidden_size = 16;
  o.config.num_attention_heads = 2;
  o.config.seq_length = 8;
  o.config.max_position_embeddings = 12;
  o.config.padded_vocab_size = 64;
  o.micro_batch_size = 2;
  o.hidden_dropout = 0.1f;
  o.attention_dropout = 0.1f;
  o.activation_dtype = activations;
  return o;
}

struct Result {
  float loss = 0.0f;
  std::vector<float> grads;
};

// The parameters as the mixed-precision optimizer holds them: 16-bit weights and their widened
// fp32 compute copy (so the fp32 model sees exactly the 16-bit values), and one micro-batch.
class Bench {
 public:
  explicit Bench(DType half)
      : table_(ParamTable::build(tiny_options(DType::kFloat32).config)),
        half_(table_, half),
        compute_(table_, DType::kFloat32) {
    std::mt19937 gen(7);
    ParamBuffer random(table_, DType::kFloat32);
    for (std::size_t p = 0; p < table_.size(); ++p) {
      const bool ones = table_[p].init == InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.6f : -0.4f, ones ? 1.4f : 0.4f);
      for (float& x : random.view(p).host_span<float>()) x = dist(gen);
    }
    ops::cast(half_.flat(), random.flat());
    ops::cast(compute_.flat(), half_.flat());
    const ModelOptions o = tiny_options(DType::kFloat32);
    const std::int64_t n = o.micro_batch_size * o.config.seq_length;
    std::uniform_int_distribution<std::int64_t> id(0, o.config.padded_vocab_size - 1);
    for (std::int64_t i = 0; i < n; ++i) {
      tokens_.push_back(id(gen));
      labels_.push_back(id(gen));
      positions_.push_back(i % o.config.seq_length);
      mask_.push_back(i % 5 == 3 ? 0.0f : 1.0f);
    }
  }

  // run() through forward_stage then backward_stage instead of forward_backward (whose head
  // takes the loss and the logits' gradient in one pass).
  void run_in_two_calls(bool two) { in_two_calls_ = two; }

  const ParamTable& table() const { return table_; }
  const ParamBuffer& half() const { return half_; }
  const ParamBuffer& compute() const { return compute_; }

  MicroBatch batch() {
    const Shape shape{2, 8};
    return {Tensor(tokens_.data(), DType::kInt64, shape),
            Tensor(labels_.data(), DType::kInt64, shape),
            Tensor(mask_.data(), DType::kFloat32, shape),
            Tensor(positions_.data(), DType::kInt64, shape)};
  }

  // One forward and backward with activations of `dtype`: fp32 reads the compute copy alone,
  // 16-bit the 16-bit weights for the GEMMs and, for the rest, the compute copy or (without
  // `compute_copy`) the 16-bit weights too.
  Result run(const ModelOptions& options, const DropoutContext& dropout = {1234, 3, 0, true},
             bool compute_copy = true) {
    GptModel model(options, table_);
    ParamBuffer grads(table_, DType::kFloat32);
    const ModelParams params = options.activation_dtype == DType::kFloat32 ? ModelParams(compute_)
                               : compute_copy ? ModelParams(compute_, half_)
                                              : ModelParams(half_);
    Result r;
    if (in_two_calls_) {
      r.loss = model.forward_stage(0, params, batch(), dropout, {}, {});
      model.backward_stage(0, params, grads, {}, {}, 4.0f);
    } else {
      r.loss = model.forward_backward(params, grads, batch(), dropout, 4.0f);
    }
    const auto flat = grads.flat().host_span<float>();
    r.grads.assign(flat.begin(), flat.end());
    return r;
  }

 private:
  ParamTable table_;
  ParamBuffer half_;
  ParamBuffer compute_;
  std::vector<std::int64_t> tokens_, labels_, positions_;
  std::vector<float> mask_;
  bool in_two_calls_ = false;
};

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// ‖a − b‖ / ‖b‖ over the whole gradient.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

bool bit_equal(const Result& a, const Result& b) {
  return a.loss == b.loss && a.grads.size() == b.grads.size() &&
         std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0;
}

struct Bounds {
  DType dtype;
  double loss, grad_error;
};

// Each activation is rounded once per op (relative error up to 2^-9 for bf16, 2^-12 for fp16)
// and the gradients go through ~40 such roundings in three layers and the head. Measured on this
// model: bf16 loss 2.8e-4 relative, gradient ‖Δ‖/‖g‖ 1.4e-2, cosine 0.99990; fp16 4.5e-6, 1.6e-3,
// 0.999999. The bounds are ~3.5–7x those (fp16's loss bound one fp16 rounding), far below what
// an activation left unrounded in the wrong place or a wrong gradient would give.
class GptModel16Bit : public ::testing::TestWithParam<Bounds> {};

TEST_P(GptModel16Bit, LossAndGradientsFollowTheFp32Model) {
  const Bounds bounds = GetParam();
  Bench bench(bounds.dtype);
  const Result fp32 = bench.run(tiny_options(DType::kFloat32));
  const Result half = bench.run(tiny_options(bounds.dtype));
  ASSERT_TRUE(std::isfinite(half.loss));
  EXPECT_NEAR(half.loss, fp32.loss, bounds.loss * std::abs(fp32.loss));
  EXPECT_GT(cosine(half.grads, fp32.grads), 0.999);
  EXPECT_LT(relative_error(half.grads, fp32.grads), bounds.grad_error);
  EXPECT_FALSE(bit_equal(half, fp32));  // the activations really were rounded
}

TEST_P(GptModel16Bit, IsDeterministicAndCheckpointingIsBitIdentical) {
  const Bounds bounds = GetParam();
  Bench bench(bounds.dtype);
  ModelOptions o = tiny_options(bounds.dtype);
  const Result first = bench.run(o);
  EXPECT_TRUE(bit_equal(first, bench.run(o)));
  o.checkpoint_activations = true;
  o.checkpoint_num_layers = 2;
  EXPECT_TRUE(bit_equal(first, bench.run(o)));
}

// ModelOptions::gemm_epilogues moves work into cuBLASLt's epilogues on a CUDA device only: on the
// host the 16-bit model (with the compute copy or the 16-bit weights alone) gives the same bits
// with it as without.
TEST_P(GptModel16Bit, GemmEpiloguesLeaveTheHostAlone) {
  const Bounds bounds = GetParam();
  Bench bench(bounds.dtype);
  ModelOptions o = tiny_options(bounds.dtype);
  for (const bool compute_copy : {true, false}) {
    o.gemm_epilogues = false;
    const Result plain = bench.run(o, {1234, 3, 0, true}, compute_copy);
    o.gemm_epilogues = true;
    EXPECT_TRUE(bit_equal(plain, bench.run(o, {1234, 3, 0, true}, compute_copy)));
  }
}

// What the trainer runs on a device: every parameter from the 16-bit weights. The ops widen the
// LayerNorm weights, biases and embedding tables as they load them, so the loss and every
// gradient are those of the compute-copy run, bit for bit (with dropout, and recomputing).
TEST_P(GptModel16Bit, SixteenBitWeightsAloneGiveTheComputeCopyBits) {
  Bench bench(GetParam().dtype);
  ModelOptions o = tiny_options(GetParam().dtype);
  const DropoutContext dropout{1234, 3, 0, true};
  const Result alone = bench.run(o, dropout, false);
  ASSERT_TRUE(std::isfinite(alone.loss));
  EXPECT_TRUE(bit_equal(alone, bench.run(o, dropout, true)));
  o.checkpoint_activations = true;
  o.checkpoint_num_layers = 2;
  EXPECT_TRUE(bit_equal(alone, bench.run(o, dropout, false)));
}

// forward_backward knows the loss scale before the forward, so its head computes the loss and
// the logits' gradient together: the same loss and gradients, bit for bit, as the forward and
// the backward called one after the other (fp32 too).
TEST_P(GptModel16Bit, ForwardBackwardIsTheTwoCallsBitForBit) {
  Bench bench(GetParam().dtype);
  for (const DType dtype : {GetParam().dtype, DType::kFloat32}) {
    ModelOptions o = tiny_options(dtype);
    const Result together = bench.run(o);
    bench.run_in_two_calls(true);
    const Result apart = bench.run(o);
    bench.run_in_two_calls(false);
    ASSERT_TRUE(std::isfinite(together.loss));
    EXPECT_TRUE(bit_equal(together, apart)) << tensor::dtype_name(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GptModel16Bit,
                         ::testing::Values(Bounds{DType::kBFloat16, 2e-3, 5e-2},
                                           Bounds{DType::kFloat16, 5e-4, 6e-3}),
                         [](const auto& param_info) {
                           return std::string(
                               param_info.param.dtype == DType::kBFloat16 ? "BFloat16" : "Float16");
                         });

// One pipeline stage of the 16-bit model with its own 16-bit weights copied from the whole
// model's, read alone (no compute copy, as the trainer runs a 16-bit stage).
struct HalfStage {
  ModelOptions options;
  ParamTable table;
  ParamBuffer half, grads;
  GptModel model;

  HalfStage(const ModelOptions& whole, const std::vector<std::int64_t>& parts, std::int64_t stage,
            const Bench& bench)
      : options(staged(whole, parts, stage)),
        table(ParamTable::build(options.config)),
        half(table, bench.half().dtype()),
        grads(table, DType::kFloat32),
        model(options, table) {
    for (std::size_t p = 0; p < table.size(); ++p) {
      const std::size_t from = bench.table().index_of(table[p].layer, table[p].name);
      ops::cast(half.view(p), bench.half().view(from));
    }
  }
  static ModelOptions staged(ModelOptions o, const std::vector<std::int64_t>& parts,
                             std::int64_t stage) {
    set_stage_specs(o.config, parts, stage);
    return o;
  }
  ModelParams params() const { return half; }
};

// Two stages passing their bf16 stage tensors as they are (the forward) and an fp32 gradient
// (the backward, cast at both ends) compute what the whole bf16 model computes (there with the
// compute copy, here without): the same ops on the same values, so losses and every gradient but
// the tied word embedding's are bit-identical; that one is summed from the two stages' replicas in
// another order (1e-6).
TEST(GptModel16BitStages, TwoStagesMatchTheWholeModel) {
  Bench bench(DType::kBFloat16);
  const ModelOptions whole = tiny_options(DType::kBFloat16);
  const DropoutContext dropout{1234, 3, 0, true};
  const Result reference = bench.run(whole, dropout);
  const std::vector<std::int64_t> parts =
      pipeline_partition(whole.config, true, 2, "type:transformer");
  HalfStage first(whole, parts, 0, bench), last(whole, parts, 1, bench);
  const MicroBatch batch = bench.batch();
  first.model.forward_stage(0, first.params(), batch, dropout, {}, first.model.stage_output(0));
  ops::cast(last.model.stage_input(0), first.model.stage_output(0));
  const float loss =
      last.model.forward_stage(0, last.params(), batch, dropout, last.model.stage_input(0), {});
  std::vector<float> grad(static_cast<std::size_t>(first.model.stage_output(0).numel()));
  const Tensor grad_tensor(grad.data(), DType::kFloat32, first.model.stage_output(0).shape());
  last.model.backward_stage(0, last.params(), last.grads, {}, grad_tensor, 4.0f);
  first.model.backward_stage(0, first.params(), first.grads, grad_tensor, {}, 4.0f);
  EXPECT_EQ(loss, reference.loss);

  const std::size_t word =
      bench.table().index_of(GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  std::vector<float> word_grad(static_cast<std::size_t>(bench.table()[word].local_numel()), 0.0f);
  std::size_t compared = 0;
  for (const HalfStage* stage : {&first, &last}) {
    for (std::size_t p = 0; p < stage->table.size(); ++p) {
      const ParamSpec& spec = stage->table[p];
      const auto got = stage->grads.view(p).host_span<float>();
      if (spec.layer == GptConfig::kEmbeddingSpec && spec.name == "word_embeddings.weight") {
        for (std::size_t i = 0; i < got.size(); ++i) word_grad[i] += got[i];
        continue;
      }
      if (spec.tied_replica) continue;  // the last stage's unused position embedding
      const ParamSpec& ref = bench.table()[bench.table().index_of(spec.layer, spec.name)];
      const float* want = reference.grads.data() + ref.offset;
      ++compared;
      EXPECT_EQ(std::memcmp(got.data(), want, got.size() * sizeof(float)), 0) << spec.engine_name();
    }
  }
  EXPECT_EQ(compared, bench.table().size() - 1);  // all but the word embedding
  const float* want_word = reference.grads.data() + bench.table()[word].offset;
  for (std::size_t i = 0; i < word_grad.size(); ++i) {
    ASSERT_NEAR(word_grad[i], want_word[i], 1e-6 + 1e-6 * std::abs(want_word[i])) << i;
  }
}

TEST(GptModel16BitPlan, ActivationsTakeTheDtypeAndStatisticsStayFp32) {
  const ModelOptions o = tiny_options(DType::kBFloat16);
  const Activations a(o);
  const LayerActivations& layer = a.layer(0, 1);
  for (const Tensor* t :
       {&layer.ln1, &layer.qkv, &layer.context, &layer.attention_out, &layer.ln2, &layer.fc,
        &layer.gelu, &a.stage_input(0), &a.stage_output(0), &a.head(0).ln, &a.head(0).logits,
        &a.workspace().grad, &a.workspace().ffn_a, &a.workspace().qkv}) {
    EXPECT_EQ(t->dtype(), DType::kBFloat16);
  }
  for (const Tensor* t : {&layer.ln1_mean, &layer.ln2_rstd, &layer.probs, &a.head(0).max,
                          &a.head(0).sum_exp, &a.head(0).loss, &a.workspace().probs_a}) {
    EXPECT_EQ(t->dtype(), DType::kFloat32);
  }
  EXPECT_LT(Activations::planned_bytes(o),
            Activations::planned_bytes(tiny_options(DType::kFloat32)));
}

std::string message_of(const auto& call) {
  try {
    call();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(GptModel16BitPlan, RefusesWrongDtypesInOneLine) {
  Bench bench(DType::kBFloat16);
  ModelOptions o = tiny_options(DType::kInt64);
  EXPECT_EQ(message_of([&] { GptModel(o, bench.table()); }),
            "ModelOptions: activation_dtype must be float32, bfloat16 or float16, got int64");
  GptModel half(tiny_options(DType::kBFloat16), bench.table());
  ParamBuffer grads(bench.table(), DType::kFloat32);
  EXPECT_EQ(
      message_of([&] { half.forward_backward(bench.compute(), grads, bench.batch(), {}, 1.0f); }),
      "GptModel: the linear layers' params (the activation dtype) must be bfloat16, got float32");
  const ParamBuffer fp16(bench.table(), DType::kFloat16);
  EXPECT_EQ(message_of([&] {
              half.forward_backward(ModelParams(fp16, bench.half()), grads, bench.batch(), {},
                                    1.0f);
            }),
            "GptModel: params must be float32 or bfloat16, got float16");
  GptModel fp32(tiny_options(DType::kFloat32), bench.table());
  EXPECT_EQ(message_of([&] {
              fp32.forward_backward(ModelParams(bench.compute(), bench.half()), grads,
                                    bench.batch(), {}, 1.0f);
            }),
            "GptModel: the linear layers' params (the activation dtype) must be float32, got "
            "bfloat16");
  EXPECT_EQ(message_of([&] {
              fp32.forward_backward(ModelParams(bench.half(), bench.compute()), grads,
                                    bench.batch(), {}, 1.0f);
            }),
            "GptModel: params must be float32, got bfloat16");
}

}  // namespace
}  // namespace mds::model
