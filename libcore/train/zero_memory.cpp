#include "train/zero_memory.h"

#include "base/error.h"

namespace mds::train {

namespace {

void check_stage(const char* op, int stage) {
  if (stage < 0 || stage > 3) base::fail(op, ": ZeRO stage must be 0, 1, 2 or 3, got ", stage);
}

// Bytes of one kind of state: whole on every rank below `partitioned_from`, split from there on.
double state_bytes(int stage, int partitioned_from, int bytes, double whole, double partition) {
  return bytes * (stage >= partitioned_from ? partition : whole);
}

ModelStateBytes model_state_bytes(int stage, StatePrecision precision, double whole,
                                  double partition) {
  const StateBytesPerElement per = bytes_per_element(precision);
  ModelStateBytes result;
  result.optimizer = state_bytes(stage, 1, per.optimizer, whole, partition);
  result.grads = state_bytes(stage, 2, per.grad, whole, partition);
  result.params = state_bytes(stage, 3, per.param, whole, partition);
  return result;
}

}  // namespace

StateBytesPerElement bytes_per_element(StatePrecision precision) {
  switch (precision) {
    case StatePrecision::kMixed:
      return {2, 2, 12};
    case StatePrecision::kFp32:
      return {4, 4, 8};
  }
  base::fail("bytes_per_element: unknown precision");
}

ModelStateBytes paper_model_state_bytes(std::int64_t psi, std::int64_t dp_size, int stage,
                                        StatePrecision precision) {
  constexpr const char* kOp = "paper_model_state_bytes";
  check_stage(kOp, stage);
  if (psi < 0) base::fail(kOp, ": parameter count must not be negative, got ", psi);
  if (dp_size < 1) base::fail(kOp, ": dp_size must be at least 1, got ", dp_size);
  const auto whole = static_cast<double>(psi);
  return model_state_bytes(stage, precision, whole, whole / static_cast<double>(dp_size));
}

ModelStateBytes plan_model_state_bytes(const ZeroLayout& layout, int stage,
                                       StatePrecision precision) {
  check_stage("plan_model_state_bytes", stage);
  return model_state_bytes(stage, precision, static_cast<double>(layout.table().buffer_numel()),
                           static_cast<double>(layout.partition_numel()));
}

model::GptConfig gpt2_memory_config(std::int64_t num_layers, std::int64_t hidden_size,
                                    std::int64_t num_attention_heads) {
  model::GptConfig config;
  config.num_layers = num_layers;
  config.hidden_size = hidden_size;
  config.num_attention_heads = num_attention_heads;
  config.seq_length = 1024;
  config.max_position_embeddings = 1024;
  config.padded_vocab_size = 50304;
  model::validate(config);
  return config;
}

}  // namespace mds::train
