// A micro-batch for the model tests: random tokens and labels (uniform over the padded
// vocabulary), positions 0 .. s−1 in each row, and a loss mask with a hole at every token i with
// i mod hole_period == hole_phase, kept in host vectors that view() points into.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/gpt_model.h"
#include "model/model_options.h"
#include "tensor/tensor.h"

namespace mds::test {

struct RandomMicroBatch {
  std::vector<std::int64_t> tokens, labels, positions;
  std::vector<float> mask;
  tensor::Shape shape;

  RandomMicroBatch(const model::ModelOptions& o, std::uint32_t seed, std::int64_t hole_period,
                   std::int64_t hole_phase)
      : shape{o.micro_batch_size, o.config.seq_length} {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<std::int64_t> id(0, o.config.padded_vocab_size - 1);
    for (std::int64_t i = 0; i < shape.numel(); ++i) {
      tokens.push_back(id(gen));
      labels.push_back(id(gen));
      positions.push_back(i % o.config.seq_length);
      mask.push_back(i % hole_period == hole_phase ? 0.0f : 1.0f);
    }
  }

  // Every field, or only those a pipeline stage reads: tokens and positions for the embedding,
  // labels and the mask for the head.
  model::MicroBatch view(bool inputs = true, bool targets = true) {
    using tensor::DType;
    using tensor::Tensor;
    model::MicroBatch batch;
    if (inputs) {
      batch.tokens = Tensor(tokens.data(), DType::kInt64, shape);
      batch.position_ids = Tensor(positions.data(), DType::kInt64, shape);
    }
    if (targets) {
      batch.labels = Tensor(labels.data(), DType::kInt64, shape);
      batch.loss_mask = Tensor(mask.data(), DType::kFloat32, shape);
    }
    return batch;
  }
};

}  // namespace mds::test
