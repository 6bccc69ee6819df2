// KV-cache inference against the training forward and a full recomputation, and the decoding
// loop: greedy output is the argmax of a full forward at every position, batching and
// --recompute change nothing, sampling is reproducible per seed.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "model/gpt_model.h"
#include "model/init.h"
#include "tasks/generation.h"
#include "tasks/gpt_inference.h"
#include "tasks/sampling.h"

namespace mds::tasks {
namespace {

using tensor::DType;
using tensor::Tensor;

struct TinyModel {
  model::ModelOptions options;
  model::ParamTable table;
  model::ParamBuffer params;
  explicit TinyModel(std::int64_t layers = 3, bool embed_layernorm = false, bool alibi = false)
      : options(make_options(layers, embed_layernorm, alibi)),
        table(model::ParamTable::build(options.config)),
        params(table, DType::kFloat32) {
    model::initialize_parameters(params, 1234);
    // Perturb so that biases and LayerNorm parameters matter; larger weights give peaked logits.
    float* data = params.flat().data<float>();
    for (std::int64_t i = 0; i < params.flat().numel(); ++i) {
      data[i] = data[i] * 8.0f + 0.05f * std::sin(0.37f * static_cast<float>(i));
    }
  }
  static model::ModelOptions make_options(std::int64_t layers, bool embed_layernorm, bool alibi) {
    model::ModelOptions o;
    o.config.num_layers = layers;
    o.config.embed_layernorm = embed_layernorm;
    if (alibi) o.config.position_embedding = model::PositionEmbedding::kAlibi;
    o.config.hidden_size = 24;
    o.config.num_attention_heads = 3;
    o.config.seq_length = 16;
    o.config.max_position_embeddings = 20;
    o.config.padded_vocab_size = 64;
    o.hidden_dropout = 0.0f;
    o.attention_dropout = 0.0f;
    o.micro_batch_size = 1;
    return o;
  }
};

// Per-token losses from the inference logits against GptModel::forward_loss: GPT-2, with
// --embed-layernorm, and BLOOM's ALiBi with it (the cached keys take their absolute positions'
// bias).
enum class Variant { kPlain, kEmbedLayerNorm, kBloom };
TinyModel tiny_model(Variant variant) {
  return TinyModel(3, variant != Variant::kPlain, variant == Variant::kBloom);
}
class GptInferenceTest : public ::testing::TestWithParam<Variant> {};

TEST_P(GptInferenceTest, LogitsMatchTheTrainingForward) {
  TinyModel m = tiny_model(GetParam());
  const GptInference inference(m.options, m.table, m.params);
  const std::int64_t s = m.options.config.seq_length, vp = m.options.config.padded_vocab_size;
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(s)), labels(tokens.size()),
      positions(tokens.size());
  std::vector<float> mask(tokens.size(), 1.0f), losses(tokens.size());
  for (std::int64_t i = 0; i < s; ++i) {
    tokens[static_cast<std::size_t>(i)] = (i * 7 + 3) % 50;
    labels[static_cast<std::size_t>(i)] = (i * 11 + 5) % 60;
    positions[static_cast<std::size_t>(i)] = i;
  }
  model::GptModel gpt(m.options, m.table);
  model::MicroBatch batch{Tensor(tokens.data(), DType::kInt64, {1, s}),
                          Tensor(labels.data(), DType::kInt64, {1, s}),
                          Tensor(mask.data(), DType::kFloat32, {1, s}),
                          Tensor(positions.data(), DType::kInt64, {1, s})};
  model::DropoutContext no_dropout;
  no_dropout.training = false;
  gpt.forward_loss(m.params, batch, no_dropout, Tensor(losses.data(), DType::kFloat32, {1, s}));

  const std::vector<float> logits = inference.full_logits(tokens);
  for (std::int64_t i = 0; i < s; ++i) {
    const float* row = logits.data() + i * vp;
    double max = row[0], sum = 0.0;
    for (std::int64_t v = 1; v < vp; ++v) max = std::max<double>(max, row[v]);
    for (std::int64_t v = 0; v < vp; ++v) sum += std::exp(row[v] - max);
    const double loss = std::log(sum) + max - row[labels[static_cast<std::size_t>(i)]];
    EXPECT_NEAR(loss, losses[static_cast<std::size_t>(i)], 1e-4 * std::max(1.0, loss))
        << "position " << i;
  }
}

TEST_P(GptInferenceTest, CachedStepsEqualTheFullForward) {
  TinyModel m = tiny_model(GetParam());
  const GptInference inference(m.options, m.table, m.params);
  const std::int64_t vp = m.options.config.padded_vocab_size;
  const std::vector<std::int64_t> tokens{5, 9, 2, 33, 17, 8, 41, 0, 12};
  const std::vector<float> full = inference.full_logits(tokens);
  KvCache cache(m.options.config, 1, 16);
  std::vector<float> stepped = inference.forward(cache, std::span(tokens.data(), 4), 4, 4);
  for (std::size_t i = 4; i < tokens.size(); ++i) {
    const std::vector<float> one = inference.forward(cache, std::span(tokens.data() + i, 1), 1);
    stepped.insert(stepped.end(), one.begin(), one.end());
  }
  ASSERT_EQ(stepped.size(), full.size());
  for (std::size_t i = 0; i < full.size(); ++i) {
    EXPECT_NEAR(stepped[i], full[i], 1e-4f * std::max(1.0f, std::fabs(full[i]))) << i / vp;
  }
  EXPECT_EQ(cache.length(), 9);
  const std::vector<std::int64_t> too_many(8, 1);
  EXPECT_THROW(inference.forward(cache, too_many, 8), base::Error);
}

INSTANTIATE_TEST_SUITE_P(Models, GptInferenceTest,
                         ::testing::Values(Variant::kPlain, Variant::kEmbedLayerNorm,
                                           Variant::kBloom),
                         [](const auto& param_info) {
                           return std::string(param_info.param == Variant::kPlain ? "Gpt2"
                                              : param_info.param == Variant::kBloom
                                                  ? "Bloom"
                                                  : "EmbedLayerNorm");
                         });

GenerationOptions greedy_options() {
  GenerationOptions o;
  o.sampling.greedy = true;
  o.seq_length = 16;
  o.out_seq_length = 10;
  o.eod = 63;
  o.vocab_size = 60;  // 60..63 are padding: never chosen
  return o;
}

TEST(GenerateTest, GreedyIsTheArgmaxOfAFullForward) {
  TinyModel m;
  const GptInference inference(m.options, m.table, m.params);
  const std::vector<GenerationRow> rows{{{5, 9, 2}, 0}, {{7}, 1}, {{1, 2, 3, 4, 5, 6}, 2}};
  const std::vector<GenerationResult> results = generate(inference, rows, greedy_options());
  ASSERT_EQ(results.size(), 3u);
  const std::int64_t vp = m.options.config.padded_vocab_size;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const GenerationResult& result = results[r];
    EXPECT_EQ(result.context_length, static_cast<std::int64_t>(rows[r].context.size()));
    const std::vector<std::int64_t> context(result.tokens.begin(),
                                            result.tokens.begin() + result.context_length);
    EXPECT_EQ(context, rows[r].context);
    EXPECT_LE(result.generated(), 10);
    if (!result.finished) {
      EXPECT_EQ(static_cast<std::int64_t>(result.tokens.size()),
                std::min<std::int64_t>(16, result.context_length + 10));
    }
    const std::vector<float> full = inference.full_logits(result.tokens);
    for (std::size_t c = static_cast<std::size_t>(result.context_length); c < result.tokens.size();
         ++c) {
      const std::span<const float> row(full.data() + (c - 1) * static_cast<std::size_t>(vp), 60);
      const std::int64_t want = argmax(row);
      // A near-tie may fall either way between the cached and the full computation.
      EXPECT_TRUE(result.tokens[c] == want ||
                  std::fabs(row[static_cast<std::size_t>(result.tokens[c])] -
                            row[static_cast<std::size_t>(want)]) < 1e-4f)
          << "row " << r << " position " << c;
    }
  }
  // One row at a time and with recomputation give the same tokens.
  for (std::size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(generate(inference, {rows[r]}, greedy_options())[0].tokens, results[r].tokens);
  }
  GenerationOptions recompute = greedy_options();
  recompute.recompute = true;
  const std::vector<GenerationResult> again = generate(inference, rows, recompute);
  for (std::size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(again[r].tokens, results[r].tokens);
}

TEST(GenerateTest, SeededSamplingIsReproducible) {
  TinyModel m;
  const GptInference inference(m.options, m.table, m.params);
  GenerationOptions o = greedy_options();
  o.sampling.greedy = false;
  o.sampling.top_k = 20;
  o.sampling.temperature = 2.0;
  o.seed = 99;
  const std::vector<GenerationRow> rows{{{63}, 0}, {{63}, 1}, {{63}, 2}, {{63}, 3}};
  const std::vector<GenerationResult> a = generate(inference, rows, o);
  const std::vector<GenerationResult> b = generate(inference, rows, o);
  bool differ = false;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(a[r].tokens, b[r].tokens);
    // A row's sample does not depend on its batch.
    EXPECT_EQ(generate(inference, {rows[r]}, o)[0].tokens, a[r].tokens);
    for (std::int64_t id : a[r].tokens) EXPECT_LT(id == 63 ? 0 : id, 60);
    differ = differ || a[r].tokens != a[0].tokens;
  }
  EXPECT_TRUE(differ);  // different streams give different samples
  o.seed = 100;
  const std::vector<GenerationResult> c = generate(inference, rows, o);
  bool changed = false;
  for (std::size_t r = 0; r < rows.size(); ++r) changed = changed || c[r].tokens != a[r].tokens;
  EXPECT_TRUE(changed);
}

TEST(GenerateTest, StopsAtTheLengthLimits) {
  TinyModel m;
  const GptInference inference(m.options, m.table, m.params);
  GenerationOptions o = greedy_options();
  o.eod = 62;  // suppose EOD never comes: every row runs to its limit
  o.vocab_size = 62;
  o.out_seq_length = 4;
  const std::vector<GenerationResult> r =
      generate(inference, {{{1, 2}, 0}, {std::vector<std::int64_t>(14, 3), 1}}, o);
  if (!r[0].finished) {
    EXPECT_EQ(r[0].tokens.size(), 6u);  // 2 + out_seq_length
  }
  if (!r[1].finished) {
    EXPECT_EQ(r[1].tokens.size(), 16u);  // seq_length
  }
  const std::vector<GenerationRow> too_long{{std::vector<std::int64_t>(16, 3), 0}};
  EXPECT_THROW(generate(inference, too_long, o), base::Error);
}

}  // namespace
}  // namespace mds::tasks
