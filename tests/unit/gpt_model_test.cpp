#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/activation_plan.h"
#include "model/gpt_model.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"

namespace mds::model {
namespace {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

ModelOptions tiny_options(std::int64_t layers = 3) {
  ModelOptions o;
  o.config.num_layers = layers;  // three layers reach a query-key coefficient of 2
  o.config.hidden_size = 16;
  o.config.num_attention_heads = 2;
  o.config.seq_length = 8;
  o.config.max_position_embeddings = 12;
  o.config.padded_vocab_size = 64;
  o.micro_batch_size = 2;
  o.hidden_dropout = 0.0f;
  o.attention_dropout = 0.0f;
  return o;
}

// A model with its table, parameters, gradients and one micro-batch, all over host vectors.
class Harness {
 public:
  explicit Harness(const ModelOptions& options, std::uint32_t seed = 7)
      : table_(std::make_unique<ParamTable>(ParamTable::build(options.config))),
        params(*table_, DType::kFloat32),
        grads(*table_, DType::kFloat32),
        model(options, *table_) {
    randomize_parameters(seed);
    batch_data_ = make_batch(options, seed + 1);
  }

  const ParamTable& table() const { return *table_; }

  // Parameters large enough that every gradient is well above fp32 noise: weights and biases
  // uniform in ±0.4, LayerNorm weights around 1.
  void randomize_parameters(std::uint32_t seed) {
    std::mt19937 gen(seed);
    for (std::size_t p = 0; p < table_->size(); ++p) {
      const bool ones = (*table_)[p].init == InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.6f : -0.4f, ones ? 1.4f : 0.4f);
      for (float& x : params.view(p).host_span<float>()) x = dist(gen);
    }
  }

  struct BatchData {
    std::vector<std::int64_t> tokens, labels, positions;
    std::vector<float> mask;
  };

  static BatchData make_batch(const ModelOptions& o, std::uint32_t seed) {
    const std::int64_t b = o.micro_batch_size, s = o.config.seq_length;
    std::mt19937 gen(seed);
    std::uniform_int_distribution<std::int64_t> id(0, o.config.padded_vocab_size - 1);
    BatchData d;
    for (std::int64_t i = 0; i < b * s; ++i) {
      d.tokens.push_back(id(gen));
      d.labels.push_back(id(gen));
      d.positions.push_back(i % s);
      d.mask.push_back(i % 5 == 3 ? 0.0f : 1.0f);  // some tokens do not count
    }
    return d;
  }

  MicroBatch batch() {
    const std::int64_t b = model.options().micro_batch_size;
    const std::int64_t s = model.options().config.seq_length;
    return {Tensor(batch_data_.tokens.data(), DType::kInt64, Shape{b, s}),
            Tensor(batch_data_.labels.data(), DType::kInt64, Shape{b, s}),
            Tensor(batch_data_.mask.data(), DType::kFloat32, Shape{b, s}),
            Tensor(batch_data_.positions.data(), DType::kInt64, Shape{b, s})};
  }
  BatchData& batch_data() { return batch_data_; }

  std::vector<float> grad_values() const {
    const auto flat = grads.flat().host_span<float>();
    return {flat.begin(), flat.end()};
  }
  void zero_grads() {
    for (float& g : grads.flat().host_span<float>()) g = 0.0f;
  }
  float step(const DropoutContext& dropout, float loss_scale = 1.0f,
             GradientWrite write = GradientWrite::kAdd) {
    return model.forward_backward(params, grads, batch(), dropout, loss_scale, write);
  }

 private:
  std::unique_ptr<ParamTable> table_;

 public:
  ParamBuffer params;
  ParamBuffer grads;
  GptModel model;

 private:
  BatchData batch_data_;
};

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Checks every parameter's gradient against central differences of the forward loss: `per_tensor`
// random elements of each tensor, and the directional derivative along a random direction over
// the whole tensor (a large signal that catches a wrong gradient anywhere in it).
void check_gradients(Harness& h, const DropoutContext& dropout, int per_tensor) {
  h.zero_grads();
  h.step(dropout);
  const auto loss = [&] {
    return static_cast<double>(h.model.forward_loss(h.params, h.batch(), dropout));
  };
  std::mt19937 gen(99);
  constexpr float kEps = 1e-2f;
  for (std::size_t p = 0; p < h.table().size(); ++p) {
    const std::string name = h.table()[p].engine_name();
    const auto values = h.params.view(p).host_span<float>();
    const auto grad = h.grads.view(p).host_span<float>();
    const auto n = static_cast<std::int64_t>(values.size());

    std::uniform_int_distribution<std::int64_t> pick(0, n - 1);
    for (int k = 0; k < std::min<std::int64_t>(per_tensor, n); ++k) {
      const std::int64_t i = pick(gen);
      const float saved = values[i];
      values[i] = saved + kEps;
      const double up = loss();
      values[i] = saved - kEps;
      const double down = loss();
      values[i] = saved;
      const double numeric = (up - down) / (2.0 * kEps);
      EXPECT_NEAR(grad[i], numeric, 1e-4 + 2e-2 * std::fabs(numeric)) << name << "[" << i << "]";
    }

    std::vector<float> direction(values.size());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    double norm = 0.0, analytic = 0.0;
    for (float& d : direction) {
      d = normal(gen);
      norm += static_cast<double>(d) * d;
    }
    const std::vector<float> saved(values.begin(), values.end());
    const auto shift = [&](float step) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = saved[i] + step * direction[i] / static_cast<float>(std::sqrt(norm));
      }
    };
    for (std::size_t i = 0; i < values.size(); ++i) {
      analytic += static_cast<double>(grad[i]) * direction[i] / std::sqrt(norm);
    }
    shift(kEps);
    const double up = loss();
    shift(-kEps);
    const double down = loss();
    std::copy(saved.begin(), saved.end(), values.begin());
    const double numeric = (up - down) / (2.0 * kEps);
    EXPECT_NEAR(analytic, numeric, 1e-4 + 1e-2 * std::fabs(numeric))
        << name << " along a direction";
  }
}

TEST(GptModel, GradientsMatchFiniteDifferences) {
  Harness h(tiny_options());
  check_gradients(h, DropoutContext{}, 16);
}

// With dropout on the masks are fixed by the context, so the loss is still a smooth function of
// the parameters; this checks that forward and backward apply the same masks at every site.
TEST(GptModel, GradientsMatchFiniteDifferencesWithDropoutAndOtherFlags) {
  ModelOptions o = tiny_options(2);
  o.hidden_dropout = 0.2f;
  o.attention_dropout = 0.2f;
  o.apply_residual_connection_post_layernorm = true;
  o.apply_query_key_layer_scaling = false;
  o.gelu = ops::GeluKind::kErf;
  o.config.ffn_hidden_size = 24;
  o.config.embed_layernorm = true;
  o.config.position_embedding = PositionEmbedding::kAlibi;
  Harness h(o);
  check_gradients(h, DropoutContext{5, 3, 1, true}, 6);
}

TEST(GptModel, CheckpointingIsBitIdentical) {
  for (const std::int64_t interval : {1, 2, 3}) {
    ModelOptions o = tiny_options(4);
    o.hidden_dropout = 0.25f;
    o.attention_dropout = 0.25f;
    Harness plain(o);
    o.checkpoint_activations = true;
    o.checkpoint_num_layers = interval;
    Harness checkpointed(o);
    const DropoutContext dropout{11, 2, 1, true};
    for (int call = 0; call < 2; ++call) {  // the second call also checks accumulation matches
      const float a = plain.step(dropout, 4.0f);
      const float b = checkpointed.step(dropout, 4.0f);
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << interval << ": " << a << " vs " << b;
      EXPECT_TRUE(bit_equal(plain.grad_values(), checkpointed.grad_values())) << interval;
    }
  }
}

// GradientWrite::kOverwrite over a buffer of NaNs gives, bit for bit and padding included, what
// adding into zeros gives: every element is written, the GEMM weights' without the zeros.
TEST(GptModel, OverwritingWritesWhatAddingIntoZerosWrites) {
  for (const bool checkpointed : {false, true}) {
    ModelOptions o = tiny_options(3);
    o.hidden_dropout = 0.25f;
    o.attention_dropout = 0.25f;
    o.checkpoint_activations = checkpointed;
    o.config.embed_layernorm = checkpointed;  // its gradients are added into: zeroed first
    Harness added(o), overwritten(o);
    const DropoutContext dropout{11, 2, 1, true};
    added.zero_grads();
    const float loss = added.step(dropout, 4.0f, GradientWrite::kAdd);
    for (int call = 0; call < 2; ++call) {  // over NaNs, then over the first call's gradient
      if (call == 0) {
        for (float& g : overwritten.grads.flat().host_span<float>()) g = std::nanf("");
      }
      EXPECT_EQ(overwritten.step(dropout, 4.0f, GradientWrite::kOverwrite), loss);
      EXPECT_TRUE(bit_equal(overwritten.grad_values(), added.grad_values()))
          << "checkpointed " << checkpointed << ", call " << call;
    }
    EXPECT_GT(overwritten.table().buffer_numel(), overwritten.table().local_numel());  // padding
  }
}

// The backward reports every parameter once, and only once nothing more is written into its
// gradient: a snapshot taken when it is reported equals the buffer after the backward (over
// NaNs, so a report before the overwrite is caught too). The head's LayerNorm comes first, the
// word embedding (head and lookups) last.
TEST(GptModel, ReportsEachGradientOnceItIsFinal) {
  for (const bool checkpointed : {false, true}) {
    ModelOptions o = tiny_options(3);
    o.hidden_dropout = 0.25f;
    o.checkpoint_activations = checkpointed;
    o.config.embed_layernorm = checkpointed;  // its LayerNorm is reported after the embeddings
    Harness h(o);
    for (float& g : h.grads.flat().host_span<float>()) g = std::nanf("");
    std::vector<std::vector<float>> snapshots(h.table().size());
    std::vector<int> reports(h.table().size(), 0);
    std::vector<std::size_t> order;
    const GradientsReady ready = [&](std::span<const std::size_t> params) {
      for (const std::size_t p : params) {
        ++reports.at(p);
        const auto values = h.grads.view(p).host_span<float>();
        snapshots[p].assign(values.begin(), values.end());
        order.push_back(p);
      }
    };
    h.model.forward_backward(h.params, h.grads, h.batch(), DropoutContext{3, 1, 0, true}, 2.0f,
                             GradientWrite::kOverwrite, ready);
    for (std::size_t p = 0; p < h.table().size(); ++p) {
      const std::string name = h.table()[p].engine_name();
      EXPECT_EQ(reports[p], 1) << name;
      const auto final_values = h.grads.view(p).host_span<float>();
      EXPECT_TRUE(bit_equal(snapshots[p], {final_values.begin(), final_values.end()})) << name;
    }
    ASSERT_EQ(order.size(), h.table().size());
    const std::int64_t final_layernorm = o.config.final_layernorm_spec();
    EXPECT_EQ(order.front(), h.table().index_of(final_layernorm, "weight"));
    const std::size_t embedding_norm_params = o.config.embed_layernorm ? 2 : 0;
    EXPECT_EQ(order[order.size() - 2 - embedding_norm_params],
              h.table().index_of(1, "word_embeddings.weight"));
  }
}

TEST(GptModel, DropoutMasksFollowTheContext) {
  ModelOptions o = tiny_options(2);
  o.hidden_dropout = 0.1f;
  o.attention_dropout = 0.1f;
  Harness h(o);
  const DropoutContext base_context{1234, 5, 0, true};
  const float first = h.step(base_context);
  const std::vector<float> first_grads = h.grad_values();
  h.zero_grads();
  const float again = h.step(base_context);
  EXPECT_EQ(first, again);
  EXPECT_TRUE(bit_equal(first_grads, h.grad_values()));

  for (DropoutContext other : {DropoutContext{1234, 5, 1, true}, DropoutContext{1234, 6, 0, true},
                               DropoutContext{1235, 5, 0, true}}) {
    h.zero_grads();
    EXPECT_NE(h.step(other), first)
        << other.seed << " " << other.iteration << " " << other.micro_batch;
    EXPECT_FALSE(bit_equal(first_grads, h.grad_values()));
  }

  // Evaluation mode runs no dropout at all: the same as a model built without dropout.
  ModelOptions no_dropout = o;
  no_dropout.hidden_dropout = 0.0f;
  no_dropout.attention_dropout = 0.0f;
  Harness reference(no_dropout);
  const DropoutContext eval{1234, 5, 0, false};
  h.zero_grads();
  const float eval_loss = h.step(eval);
  EXPECT_EQ(eval_loss, reference.step(base_context));
  EXPECT_TRUE(bit_equal(h.grad_values(), reference.grad_values()));
  EXPECT_EQ(h.model.forward_loss(h.params, h.batch(), eval), eval_loss);
  EXPECT_NE(eval_loss, first);
}

TEST(GptModel, GradientsAccumulateAndScale) {
  Harness h(tiny_options(2));
  const DropoutContext dropout{};
  const float loss = h.step(dropout);
  const std::vector<float> once = h.grad_values();
  EXPECT_EQ(h.step(dropout), loss);
  const std::vector<float> twice = h.grad_values();
  double largest = 0.0;
  for (std::size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(twice[i], 2.0f * once[i], 1e-6 + 1e-5 * std::fabs(once[i])) << i;
    largest = std::max(largest, static_cast<double>(std::fabs(once[i])));
  }
  EXPECT_GT(largest, 1e-3);  // the comparison above is not between zeros

  // A power-of-two loss scale scales every gradient exactly; the returned loss stays unscaled.
  h.zero_grads();
  EXPECT_EQ(h.step(dropout, 8.0f), loss);
  const std::vector<float> scaled = h.grad_values();
  for (std::size_t i = 0; i < once.size(); ++i) ASSERT_EQ(scaled[i], 8.0f * once[i]) << i;

  // Two different micro-batches: their gradients add.
  Harness other(tiny_options(2));
  other.batch_data() = Harness::make_batch(other.model.options(), 1234);
  other.step(dropout);
  const std::vector<float> second = other.grad_values();
  h.zero_grads();
  h.step(dropout);
  h.batch_data() = other.batch_data();
  h.step(dropout);
  const std::vector<float> both = h.grad_values();
  for (std::size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(both[i], once[i] + second[i], 1e-6 + 1e-5 * std::fabs(both[i])) << i;
  }
}

TEST(GptModel, ForwardLossMatchesAndWritesTokenLosses) {
  Harness h(tiny_options(2));
  const DropoutContext dropout{};
  const float loss = h.step(dropout);
  const std::int64_t b = 2, s = 8;
  std::vector<float> token_losses(static_cast<std::size_t>(b * s), -1.0f);
  const Tensor out(token_losses.data(), DType::kFloat32, Shape{b, s});
  EXPECT_EQ(h.model.forward_loss(h.params, h.batch(), dropout, out), loss);
  double weighted = 0.0, count = 0.0;
  for (std::size_t i = 0; i < token_losses.size(); ++i) {
    EXPECT_GT(token_losses[i], 0.0f);
    weighted += static_cast<double>(token_losses[i]) * h.batch_data().mask[i];
    count += h.batch_data().mask[i];
  }
  EXPECT_NEAR(weighted / count, loss, 1e-5);

  // Token (1, 3) of the [b, s] batch is the only one whose loss depends on its label.
  const std::vector<float> before = token_losses;
  const std::size_t changed = 1 * s + 3;
  h.batch_data().labels[changed] = (h.batch_data().labels[changed] + 1) % 64;
  h.model.forward_loss(h.params, h.batch(), dropout, out);
  for (std::size_t i = 0; i < token_losses.size(); ++i) {
    if (i == changed) {
      EXPECT_NE(token_losses[i], before[i]);
    } else {
      EXPECT_EQ(token_losses[i], before[i]) << i;
    }
  }
}

TEST(GptModel, CheckpointChunksFollowDeepSpeed) {
  ModelOptions o = tiny_options(4);
  const auto describe = [](const std::vector<LayerChunk>& chunks) {
    std::string text;
    for (const LayerChunk& c : chunks) {
      text += "[" + std::to_string(c.first) + "," + std::to_string(c.end) +
              (c.recompute ? "r" : "") + ")";
    }
    return text;
  };
  EXPECT_EQ(describe(checkpoint_chunks(o)), "[0,1)[1,2)[2,3)[3,4)");
  o.checkpoint_activations = true;
  EXPECT_EQ(describe(checkpoint_chunks(o)), "[0,1r)[1,2r)[2,3r)[3,4r)");
  // Specs 0..9: chunks {2,3} and {6,7} hold the transpose and the undo functions.
  o.checkpoint_num_layers = 2;
  EXPECT_EQ(describe(checkpoint_chunks(o)), "[0,1)[1,3r)[3,4)");
  o.checkpoint_num_layers = 3;  // {3,4,5} = layers 0..2, {6,7,8}
  EXPECT_EQ(describe(checkpoint_chunks(o)), "[0,3r)[3,4)");
}

TEST(GptModel, CheckpointingNeedsLessActivationMemory) {
  ModelOptions o = tiny_options(4);
  const GptModel plain(o, ParamTable::build(o.config));
  o.checkpoint_activations = true;
  const ParamTable table = ParamTable::build(o.config);
  const GptModel checkpointed(o, table);
  EXPECT_LT(checkpointed.activation_bytes(), plain.activation_bytes());
  EXPECT_EQ(checkpointed.activation_bytes(), Activations::planned_bytes(o));
  // Each further layer costs one [s, b, h] input with checkpointing, a whole set without.
  ModelOptions deeper = o;
  deeper.config.num_layers = 8;
  const std::size_t checkpointed_growth =
      Activations::planned_bytes(deeper) - checkpointed.activation_bytes();
  deeper.checkpoint_activations = false;
  const std::size_t plain_growth = Activations::planned_bytes(deeper) - plain.activation_bytes();
  EXPECT_LT(4 * checkpointed_growth, plain_growth);
}

TEST(GptModel, FailsAtConstructionWithTheBytesNeeded) {
  ModelOptions o = tiny_options(1);
  o.micro_batch_size = std::int64_t{1} << 34;  // far beyond any address space
  const ParamTable table = ParamTable::build(o.config);
  try {
    GptModel model(o, table);
    FAIL() << "a model needing " << Activations::planned_bytes(o) << " bytes was built";
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot allocate " + std::to_string(Activations::planned_bytes(o))),
              std::string::npos)
        << message;
  }
}

TEST(GptModel, RejectsWhatItDoesNotSupport) {
  const auto message_of = [](const ModelOptions& o) -> std::string {
    try {
      const ParamTable table = ParamTable::build(o.config);
      GptModel model(o, table);
    } catch (const base::Error& e) {
      return e.what();
    }
    return "";
  };
  ModelOptions o = tiny_options(1);
  o.config.position_embedding = PositionEmbedding::kRotary;
  EXPECT_NE(message_of(o).find("rotary position embeddings are not supported yet"),
            std::string::npos);
  o = tiny_options(1);
  o.config.glu = true;
  EXPECT_NE(message_of(o).find("not supported yet"), std::string::npos);
  o = tiny_options(1);
  o.attention_dropout = 1.0f;
  EXPECT_NE(message_of(o).find("attention_dropout"), std::string::npos);
}

TEST(GptModel, RejectsBadBatchesAndBuffers) {
  Harness h(tiny_options(1));
  h.batch_data().tokens[5] = 64;
  try {
    h.step(DropoutContext{});
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MicroBatch.tokens[0, 5] = 64"), std::string::npos)
        << e.what();
  }
  h.batch_data().tokens[5] = 0;
  h.batch_data().positions[3] = 12;
  EXPECT_THROW(h.step(DropoutContext{}), base::Error);
  h.batch_data().positions[3] = 3;
  ParamBuffer bf16(h.table(), DType::kBFloat16);
  EXPECT_THROW(h.model.forward_loss(bf16, h.batch(), DropoutContext{}), base::Error);
  std::vector<float> wrong(3);
  EXPECT_THROW(h.model.forward_loss(h.params, h.batch(), DropoutContext{},
                                    Tensor(wrong.data(), DType::kFloat32, Shape{3})),
               base::Error);
  EXPECT_THROW(h.step(DropoutContext{std::uint64_t{1} << 32, 0, 0, true}), base::Error);
}

// The model trains: a few plain SGD steps on one batch lower its loss (from the real init).
TEST(GptModel, SgdStepsLowerTheLoss) {
  ModelOptions o = tiny_options(2);
  Harness h(o);
  initialize_parameters(h.params, 3);
  const float initial = h.step(DropoutContext{});
  float loss = initial;
  for (int step = 0; step < 20; ++step) {
    const auto p = h.params.flat().host_span<float>();
    const auto g = h.grads.flat().host_span<float>();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
    h.zero_grads();
    loss = h.step(DropoutContext{});
  }
  EXPECT_NEAR(initial, std::log(64.0f), 0.05f);  // near-uniform logits at σ = 0.02
  EXPECT_LT(loss, initial - 0.5f);
}

}  // namespace
}  // namespace mds::model
