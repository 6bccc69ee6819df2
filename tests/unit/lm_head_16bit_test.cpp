// The LM head with 16-bit activations reads its 16-bit logits directly in the cross entropy.
// Before, it cast them into an fp32 logits tensor (upstream's logits.float()), ran the fp32 loss
// there and cast the fp32 gradient back for the GEMM backward; that path is kept here
// (legacy_head_*) as the reference. The two must agree bit for bit: the loss and per-token values,
// the 16-bit logits gradient, the parameter gradients and the gradient sent down, for the head
// alone at T = 1 and T = 2 (vocab-parallel steps over thread ranks) and for the whole GptModel; and
// the plan keeps no fp32 tensor the size of the logits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/activation_plan.h"
#include "model/gpt_model.h"
#include "model/lm_head.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "ops_test_util.h"
#include "tensor/round_to.h"
#include "tests/unit/thread_communicator.h"

namespace mds::model {
namespace {

using ops_test::random_floats;
using ops_test::view;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// The head as it ran before: the 16-bit GEMM's logits cast into `logits32` (fp32, [s, b, V/T]),
// the fp32 loss on them (which leaves the exps there), then the fp32 gradient cast back into the
// 16-bit head.logits for the GEMM backward.
float legacy_head_forward(const HeadActivations& head, const InputActivations& inputs,
                          Tensor logits32, Tensor ln_weight, Tensor ln_bias, Tensor word,
                          float epsilon, const TensorParallel& tp, std::int64_t vocab_start) {
  ops::layernorm_forward(head.ln, head.ln_mean, head.ln_rstd, head.input, ln_weight, ln_bias,
                         epsilon);
  ops::linear_forward(head.logits, head.ln, word);
  ops::cast(logits32, head.logits);
  if (!tp.active()) {
    ops::cross_entropy_forward(head.loss, head.max, head.sum_exp, logits32, inputs.labels);
  } else {
    ops::cross_entropy_row_max(head.max, logits32);
    tp.max(head.max);
    ops::cross_entropy_target_logit(head.target_logit, logits32, inputs.labels, head.max,
                                    vocab_start);
    tp.sum(head.target_logit);
    ops::cross_entropy_exp_sum(head.sum_exp, logits32, head.max);
    tp.sum(head.sum_exp);
    ops::cross_entropy_loss(head.loss, head.sum_exp, head.target_logit);
  }
  return ops::masked_mean_loss(head.loss, inputs.loss_mask);
}

void legacy_head_backward(const HeadActivations& head, const InputActivations& inputs,
                          const Workspace& ws, Tensor logits32, Tensor ln_weight, Tensor word,
                          Tensor dln_weight, Tensor dln_bias, Tensor dword, float loss_scale,
                          const TensorParallel& tp, std::int64_t vocab_start) {
  ops::masked_mean_loss_backward(head.dloss, inputs.loss_mask, loss_scale);
  ops::cross_entropy_backward(logits32, logits32, inputs.labels, head.max, head.sum_exp, head.dloss,
                              vocab_start);
  ops::cast(head.logits, logits32);
  ops::fill(ws.hidden_a, 0.0f);
  ops::linear_backward(ws.hidden_a, dword, {}, head.logits, head.ln, word);
  tp.sum(ws.hidden_a);
  ops::fill(ws.grad, 0.0f);
  ops::layernorm_backward(ws.grad, dln_weight, dln_bias, ws.hidden_a, head.input, ln_weight,
                          head.ln_mean, head.ln_rstd);
}

template <typename T>
std::vector<std::uint32_t> bits_of(const std::vector<T>& values) {
  std::vector<std::uint32_t> out;
  for (const T& x : values) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    out.push_back(b);
  }
  return out;
}

template <typename T>
std::vector<T> rounded(const std::vector<float>& values) {
  std::vector<T> out;
  for (const float x : values) out.push_back(tensor::round_to<T>(x));
  return out;
}

// One rank's head tensors on host vectors: what the activation plan would give it, plus the
// gradients the head writes or adds into.
template <typename T>
struct HeadBuffers {
  static constexpr std::int64_t kS = 8, kB = 2, kH = 16;
  std::int64_t vocab;
  std::vector<T> input, ln, logits, grad, hidden_a;
  std::vector<float> ln_mean, ln_rstd, max, target_logit, sum_exp, loss, dloss;
  std::vector<float> dln_weight, dln_bias, dword;

  HeadBuffers(const std::vector<T>& head_input, std::int64_t local_vocab)
      : vocab(local_vocab),
        input(head_input),
        ln(kS * kB * kH),
        logits(static_cast<std::size_t>(kS * kB * local_vocab)),
        grad(kS * kB * kH),
        hidden_a(kS * kB * kH),
        ln_mean(kS * kB),
        ln_rstd(kS * kB),
        max(kS * kB),
        target_logit(kS * kB),
        sum_exp(kS * kB),
        loss(kS * kB),
        dloss(kS * kB),
        // Parameter gradients start non-zero: the head adds into them.
        dln_weight(random_floats(kH, 21)),
        dln_bias(random_floats(kH, 22)),
        dword(random_floats(static_cast<std::size_t>(local_vocab * kH), 23)) {}

  HeadActivations head() {
    HeadActivations h;
    h.input = view(input, {kS, kB, kH});
    h.ln = view(ln, {kS, kB, kH});
    h.ln_mean = view(ln_mean, {kS, kB});
    h.ln_rstd = view(ln_rstd, {kS, kB});
    h.logits = view(logits, {kS, kB, vocab});
    h.max = view(max, {kS, kB});
    h.target_logit = view(target_logit, {kS, kB});
    h.sum_exp = view(sum_exp, {kS, kB});
    h.loss = view(loss, {kS, kB});
    h.dloss = view(dloss, {kS, kB});
    return h;
  }
  Workspace workspace() {
    Workspace w;
    w.grad = view(grad, {kS, kB, kH});
    w.hidden_a = view(hidden_a, {kS, kB, kH});
    return w;
  }
};

template <typename T>
void expect_same(const HeadBuffers<T>& got, const HeadBuffers<T>& want, const std::string& what) {
  EXPECT_EQ(bits_of(got.max), bits_of(want.max)) << what;
  EXPECT_EQ(bits_of(got.sum_exp), bits_of(want.sum_exp)) << what;
  EXPECT_EQ(bits_of(got.loss), bits_of(want.loss)) << what;
  EXPECT_EQ(bits_of(got.logits), bits_of(want.logits)) << what << ": 16-bit logits gradient";
  EXPECT_EQ(bits_of(got.dword), bits_of(want.dword)) << what;
  EXPECT_EQ(bits_of(got.dln_weight), bits_of(want.dln_weight)) << what;
  EXPECT_EQ(bits_of(got.dln_bias), bits_of(want.dln_bias)) << what;
  EXPECT_EQ(bits_of(got.grad), bits_of(want.grad)) << what << ": gradient of the head's input";
}

template <typename T>
class LmHead16Bit : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(LmHead16Bit, HalfTypes);

// T ranks of a vocabulary of 64 each run the head twice, the current way and the legacy way, on
// the same inputs (labels over the whole vocabulary, so each shard misses some targets).
TYPED_TEST(LmHead16Bit, MatchesTheFp32LogitsPathBitForBit) {
  using T = TypeParam;
  using Buffers = HeadBuffers<T>;
  constexpr std::int64_t kVocab = 64, kS = Buffers::kS, kB = Buffers::kB, kH = Buffers::kH;
  const std::vector<T> input = rounded<T>(random_floats(kS * kB * kH, 1, -2.0f, 2.0f));
  std::vector<float> ln_weight = random_floats(kH, 2, 0.5f, 1.5f), ln_bias = random_floats(kH, 3);
  std::vector<std::int64_t> labels;
  std::mt19937 gen(4);
  std::uniform_int_distribution<std::int64_t> id(0, kVocab - 1);
  for (std::int64_t i = 0; i < kS * kB; ++i) labels.push_back(id(gen));
  std::vector<float> mask(kS * kB, 1.0f);
  mask[3] = mask[10] = 0.0f;

  for (const int t : {1, 2}) {
    const std::int64_t local = kVocab / t;
    auto mail = std::make_shared<test::Mailboxes>();
    std::vector<std::thread> ranks;
    std::vector<std::unique_ptr<Buffers>> current(t), legacy(t);
    std::vector<float> losses(2 * static_cast<std::size_t>(t));
    for (int r = 0; r < t; ++r) {
      ranks.emplace_back([&, r] {
        test::ThreadCommunicator group("tp", mail, r, t);
        const TensorParallel tp(t > 1 ? &group : nullptr);
        const std::int64_t vocab_start = r * local;
        // This rank's rows of the tied word embedding, in the activation dtype (large enough
        // that the softmax is not flat).
        std::vector<T> word =
            rounded<T>(random_floats(static_cast<std::size_t>(local * kH), 30 + r, -1.5f, 1.5f));
        InputActivations inputs;
        inputs.labels = view(labels, {kS, kB});
        inputs.loss_mask = view(mask, {kS, kB});
        auto& now = current[static_cast<std::size_t>(r)];
        auto& old = legacy[static_cast<std::size_t>(r)];
        now = std::make_unique<Buffers>(input, local);
        old = std::make_unique<Buffers>(input, local);

        const HeadActivations head = now->head();
        losses[2 * r] =
            lm_head_forward({}, head, inputs, view(ln_weight, {kH}), view(ln_bias, {kH}),
                            view(word, {local, kH}), 1e-5f, tp, vocab_start);
        lm_head_backward({}, head, inputs, now->workspace(), view(ln_weight, {kH}),
                         view(word, {local, kH}), view(now->dln_weight, {kH}),
                         view(now->dln_bias, {kH}), view(now->dword, {local, kH}), 4.0f,
                         ops::loss_mask_sum(inputs.loss_mask), tp, vocab_start);

        std::vector<float> logits32(static_cast<std::size_t>(kS * kB * local));
        const HeadActivations old_head = old->head();
        losses[2 * r + 1] = legacy_head_forward(old_head, inputs, view(logits32, {kS, kB, local}),
                                                view(ln_weight, {kH}), view(ln_bias, {kH}),
                                                view(word, {local, kH}), 1e-5f, tp, vocab_start);
        legacy_head_backward(old_head, inputs, old->workspace(), view(logits32, {kS, kB, local}),
                             view(ln_weight, {kH}), view(word, {local, kH}),
                             view(old->dln_weight, {kH}), view(old->dln_bias, {kH}),
                             view(old->dword, {local, kH}), 4.0f, tp, vocab_start);
      });
    }
    for (std::thread& rank : ranks) rank.join();
    for (int r = 0; r < t; ++r) {
      const std::string what = "T = " + std::to_string(t) + ", rank " + std::to_string(r);
      EXPECT_TRUE(std::isfinite(losses[2 * r])) << what;
      EXPECT_EQ(bits_of(std::vector<float>{losses[2 * r]}),
                bits_of(std::vector<float>{losses[2 * r + 1]}))
          << what;
      expect_same(*current[static_cast<std::size_t>(r)], *legacy[static_cast<std::size_t>(r)],
                  what);
    }
  }
}

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

// The whole 16-bit model against the same model cut before the head (embedding and layers as
// pipeline stage [0, L+4), run by GptModel) followed by the legacy head: loss and every gradient
// bit for bit. The word embedding's gradient gets the head's part first and the lookups' after,
// in both, as the whole model adds them.
TYPED_TEST(LmHead16Bit, WholeModelMatchesTheFp32LogitsPathBitForBit) {
  using T = TypeParam;
  constexpr DType kDType = tensor::dtype_of<T>();
  const ModelOptions whole = tiny_options(kDType);
  const GptConfig& c = whole.config;
  const ParamTable table = ParamTable::build(c);
  ParamBuffer half(table, kDType), compute(table, DType::kFloat32);
  {
    ParamBuffer random(table, DType::kFloat32);
    std::mt19937 gen(7);
    for (std::size_t p = 0; p < table.size(); ++p) {
      const bool ones = table[p].init == InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.6f : -0.4f, ones ? 1.4f : 0.4f);
      for (float& x : random.view(p).host_span<float>()) x = dist(gen);
    }
    ops::cast(half.flat(), random.flat());
    ops::cast(compute.flat(), half.flat());
  }
  const std::int64_t s = c.seq_length, b = whole.micro_batch_size, h = c.hidden_size;
  std::vector<std::int64_t> tokens, labels, positions, labels_sb(s * b);
  std::vector<float> mask, mask_sb(s * b);
  std::mt19937 gen(8);
  std::uniform_int_distribution<std::int64_t> id(0, c.padded_vocab_size - 1);
  for (std::int64_t i = 0; i < s * b; ++i) {
    tokens.push_back(id(gen));
    labels.push_back(id(gen));
    positions.push_back(i % s);
    mask.push_back(i % 5 == 3 ? 0.0f : 1.0f);
  }
  for (std::int64_t j = 0; j < b; ++j) {
    for (std::int64_t i = 0; i < s; ++i) {  // [b, s] → the model's token-major [s, b]
      labels_sb[i * b + j] = labels[j * s + i];
      mask_sb[i * b + j] = mask[j * s + i];
    }
  }
  const MicroBatch batch{view(tokens, {b, s}), view(labels, {b, s}), view(mask, {b, s}),
                         view(positions, {b, s})};
  const DropoutContext dropout{1234, 3, 0, true};
  constexpr float kLossScale = 4.0f;

  GptModel model(whole, table);
  ParamBuffer grads(table, DType::kFloat32);
  const float loss =
      model.forward_backward(ModelParams(compute, half), grads, batch, dropout, kLossScale);

  ModelOptions body_options = whole;
  set_stage_specs(body_options.config, {0, c.final_layernorm_spec(), c.max_spec_count()}, 0);
  const ParamTable body_table = ParamTable::build(body_options.config);
  ParamBuffer body_half(body_table, kDType), body_compute(body_table, DType::kFloat32),
      body_grads(body_table, DType::kFloat32);
  for (std::size_t p = 0; p < body_table.size(); ++p) {
    const std::size_t from = table.index_of(body_table[p].layer, body_table[p].name);
    ops::cast(body_half.view(p), half.view(from));
    ops::cast(body_compute.view(p), compute.view(from));
  }
  GptModel body(body_options, body_table);
  const ModelParams body_params(body_compute, body_half);
  body.forward_stage(0, body_params, batch, dropout, {}, body.stage_output(0));

  const auto output = body.stage_output(0).host_span<T>();
  HeadBuffers<T> head_buffers(std::vector<T>(output.begin(), output.end()), c.padded_vocab_size);
  std::fill(head_buffers.dln_weight.begin(), head_buffers.dln_weight.end(), 0.0f);
  std::fill(head_buffers.dln_bias.begin(), head_buffers.dln_bias.end(), 0.0f);
  const HeadActivations head = head_buffers.head();
  InputActivations inputs;
  inputs.labels = view(labels_sb, {s, b});
  inputs.loss_mask = view(mask_sb, {s, b});
  std::vector<float> logits32(static_cast<std::size_t>(s * b * c.padded_vocab_size));
  const Tensor logits32_t = view(logits32, {s, b, c.padded_vocab_size});
  const std::size_t ln_weight = table.index_of(c.final_layernorm_spec(), "weight");
  const std::size_t ln_bias = table.index_of(c.final_layernorm_spec(), "bias");
  const std::size_t word = table.index_of(GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  const std::size_t body_word =
      body_table.index_of(GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  const float legacy_loss =
      legacy_head_forward(head, inputs, logits32_t, compute.view(ln_weight), compute.view(ln_bias),
                          half.view(word), whole.layernorm_epsilon, {}, 0);
  legacy_head_backward(head, inputs, head_buffers.workspace(), logits32_t, compute.view(ln_weight),
                       half.view(word), view(head_buffers.dln_weight, {h}),
                       view(head_buffers.dln_bias, {h}), body_grads.view(body_word), kLossScale, {},
                       0);
  // Added onto the legacy head's share of the tied embedding's gradient.
  body.backward_stage(0, body_params, body_grads, view(head_buffers.grad, {s, b, h}), {},
                      kLossScale, GradientWrite::kAdd);

  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(bits_of(std::vector<float>{loss}), bits_of(std::vector<float>{legacy_loss}));
  const auto grads_of = [](const ParamBuffer& buffer, std::size_t p) {
    const auto span = buffer.view(p).host_span<float>();
    return std::vector<float>(span.begin(), span.end());
  };
  for (std::size_t p = 0; p < body_table.size(); ++p) {
    const std::size_t from = table.index_of(body_table[p].layer, body_table[p].name);
    EXPECT_EQ(bits_of(grads_of(body_grads, p)), bits_of(grads_of(grads, from)))
        << body_table[p].engine_name();
  }
  EXPECT_EQ(bits_of(head_buffers.dln_weight), bits_of(grads_of(grads, ln_weight)));
  EXPECT_EQ(bits_of(head_buffers.dln_bias), bits_of(grads_of(grads, ln_bias)));
  EXPECT_EQ(body_table.size() + 2, table.size());  // every gradient compared
}

// The head's only vocabulary-sized activation is its logits, in the activation dtype: the planned
// bytes grow with the vocabulary by s·b·(V/T) times the dtype's size (before, a 16-bit plan also
// held fp32 logits: 6 bytes per logit instead of 2), on the host and on a device.
TEST(GptModel16BitPlan, TheHeadKeepsOneLogitsTensorOfTheActivationDtype) {
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const std::int64_t t : {1, 2}) {
      ModelOptions o = tiny_options(dtype);
      o.config.tensor_parallel_size = t;
      const Activations a(o);
      const Tensor& logits = a.head(0).logits;
      const std::int64_t s = o.config.seq_length, b = o.micro_batch_size;
      EXPECT_EQ(logits.dtype(), dtype);
      EXPECT_EQ(logits.shape(), (Shape{s, b, o.config.padded_vocab_size / t}));
      for (const tensor::Device device :
           {tensor::Device{}, tensor::Device{tensor::DeviceKind::kCuda, 0}}) {
        ModelOptions wider = o;
        wider.config.padded_vocab_size = 2 * o.config.padded_vocab_size;
        const std::size_t per_column = static_cast<std::size_t>(s * b) * tensor::dtype_size(dtype);
        EXPECT_EQ(
            Activations::planned_bytes(wider, 1, device) - Activations::planned_bytes(o, 1, device),
            static_cast<std::size_t>(o.config.padded_vocab_size / t) * per_column)
            << tensor::dtype_name(dtype) << " T = " << t;
      }
    }
  }
}

}  // namespace
}  // namespace mds::model
