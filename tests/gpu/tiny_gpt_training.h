// The tiny GPT-2 training loop the GPU training tests run on a device and on the host: a 2-layer
// model (h = 64, 4 heads, s = 32, b = 2, vocabulary 256, both dropouts 0.1) driven through
// GptModel and MixedPrecisionOptimizer as the Trainer drives them, two micro-batches per
// iteration of seeded random tokens (or a learnable Markov text, Text) with a loss mask with holes.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/device_memory.h"
#include "train/mixed_precision_optimizer.h"

namespace mds::gpu_test {

using model::GptModel;
using model::ModelOptions;
using model::ParamTable;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};
constexpr std::int64_t kMicroBatches = 2;
constexpr double kLr = 2e-3;

inline ModelOptions tiny_options() {
  ModelOptions o;
  o.config.num_layers = 2;
  o.config.hidden_size = 64;
  o.config.num_attention_heads = 4;  // head dim 16
  o.config.seq_length = 32;
  o.config.max_position_embeddings = 32;
  o.config.padded_vocab_size = 256;
  o.micro_batch_size = 2;
  // Upstream's defaults: 0.1 for both dropouts, so the masks are exercised on both sides.
  return o;
}

inline train::OptimizerOptions fp32_adam() {
  train::OptimizerOptions o;
  o.gradient_clipping = 1.0;
  o.adam.weight_decay = 0.1;
  return o;
}

// What the micro-batches hold. kRandom: uniform random tokens, nothing to learn: the loss stays
// near ln V, the gradients are noise, and Adam's normalized steps turn rounding differences into
// diverging runs after some 90 iterations (a host run from a 1-ulp perturbed start does it too,
// tests/unit/tiny_training_conditioning_test.cpp). kMarkov: each token follows its predecessor
// by a fixed map three times in four, a text the model learns, so long runs stay well
// conditioned.
enum class Text { kRandom, kMarkov };

// Micro-batch `mb` of iteration `it`: tokens of `text`, next-token labels, a loss mask with holes.
struct Batch {
  std::vector<std::int64_t> tokens, labels, positions;
  std::vector<float> mask;

  Batch(const ModelOptions& o, std::int64_t it, std::int64_t mb, Text kind = Text::kRandom) {
    const std::int64_t b = o.micro_batch_size, s = o.config.seq_length;
    const std::int64_t vocab = o.config.padded_vocab_size;
    std::mt19937 gen(static_cast<std::uint32_t>(1000 * it + mb));
    std::uniform_int_distribution<std::int64_t> id(0, vocab - 1);
    std::vector<std::int64_t> text(static_cast<std::size_t>(b * (s + 1)));
    for (std::size_t i = 0; i < text.size(); ++i) {
      const bool follows = kind == Text::kMarkov && i > 0 && gen() % 4 != 0;
      text[i] = follows ? (text[i - 1] * 5 + 3) % vocab : id(gen);
    }
    for (std::int64_t row = 0; row < b; ++row) {
      for (std::int64_t col = 0; col < s; ++col) {
        tokens.push_back(text[static_cast<std::size_t>(row * (s + 1) + col)]);
        labels.push_back(text[static_cast<std::size_t>(row * (s + 1) + col + 1)]);
        positions.push_back(col);
        mask.push_back((row * s + col) % 7 == 5 ? 0.0f : 1.0f);
      }
    }
  }
  model::MicroBatch view(const ModelOptions& o) {
    const Shape shape{o.micro_batch_size, o.config.seq_length};
    return {Tensor(tokens.data(), DType::kInt64, shape),
            Tensor(labels.data(), DType::kInt64, shape),
            Tensor(mask.data(), DType::kFloat32, shape),
            Tensor(positions.data(), DType::kInt64, shape)};
  }
};

// The optimizer options the Trainer gives a model with these activations: a bf16/fp16 optimizer
// keeps its fp32 compute copy only for fp32 activations.
inline train::OptimizerOptions as_trainer_sets(train::OptimizerOptions options,
                                               const ModelOptions& model) {
  options.fp32_compute_copy = model.activation_dtype == DType::kFloat32;
  return options;
}

// A model and its optimizer on one device, started from `initial` (host fp32, table layout).
struct TrainingRun {
  TrainingRun(const ModelOptions& model_options, const ParamTable& table,
              const ops::DeviceContext& device, Tensor initial,
              train::OptimizerOptions optimizer_options = fp32_adam())
      : options(model_options),
        model(model_options, table, nullptr, 1, &device),
        optimizer(table, as_trainer_sets(std::move(optimizer_options), model_options), nullptr,
                  nullptr, &device) {
    optimizer.initialize(initial, kLr);
  }

  // Iteration `it` as Trainer::train_iteration: the mean micro-batch loss.
  double iteration(std::int64_t it) {
    double sum = 0.0;
    for (std::int64_t mb = 0; mb < kMicroBatches; ++mb) {
      Batch batch(options, it, mb, text);
      model::DropoutContext dropout;
      dropout.seed = 77;
      dropout.iteration = static_cast<std::uint64_t>(it);
      dropout.micro_batch = static_cast<std::uint64_t>(mb);
      // As the Trainer: the loss scale (1 unless fp16) over the micro-batch count.
      const auto scale =
          static_cast<float>(optimizer.loss_scale() / static_cast<double>(kMicroBatches));
      sum += model.forward_backward(params(), optimizer.micro_grads(), batch.view(options), dropout,
                                    scale);
      optimizer.accumulate_micro_batch();
    }
    last_step = optimizer.step(kLr, it + 1);
    return sum / static_cast<double>(kMicroBatches);
  }

  // The loss of a fixed evaluation batch without dropout, and its per-token losses.
  double evaluate(std::vector<float>& token_losses) {
    Batch batch(options, 999, 0, text);
    model::DropoutContext none;
    none.training = false;
    token_losses.assign(
        static_cast<std::size_t>(options.micro_batch_size * options.config.seq_length), 0.0f);
    const Tensor losses(token_losses.data(), DType::kFloat32,
                        {options.micro_batch_size, options.config.seq_length});
    return model.forward_loss(params(), batch.view(options), none, losses);
  }

  // As Trainer::model_params: fp32 activations read the fp32 weights or the compute copy, 16-bit
  // ones the 16-bit weights alone (there is no compute copy).
  model::ModelParams params() const {
    if (options.activation_dtype == DType::kFloat32) return optimizer.compute();
    return optimizer.weights();
  }

  ModelOptions options;
  GptModel model;
  train::MixedPrecisionOptimizer optimizer;
  train::StepResult last_step;
  Text text = Text::kRandom;  // what iteration() and evaluate() train and evaluate on
};

inline std::vector<float> host_values(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  tensor::copy(Tensor(out.data(), DType::kFloat32, t.shape()), t);
  return out;
}

inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace mds::gpu_test
