// Training states over a tiny GPT for the checkpoint tests: owned flat buffers filled with
// distinct values (or zeros, to load into), and the scalars set to recognisable numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "ckpt/training_state.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "tensor/buffer.h"
#include "train/zero_partition.h"

namespace mds::ckpt::testing {

inline model::GptConfig tiny_config(
    model::PositionEmbedding position = model::PositionEmbedding::kAbsolute,
    std::int64_t ffn = 64) {
  model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = ffn;
  c.seq_length = 8;
  c.max_position_embeddings = 8;
  c.padded_vocab_size = 64;
  c.position_embedding = position;
  return c;
}

// The layouts with a ZeRO file keep master and moments as partitions (one DP rank here).
struct OwnedState {
  OwnedState(const model::GptConfig& config, OptimizerLayout layout)
      : table(model::ParamTable::build(config)),
        zero(table, 1),
        params(table, params_dtype(layout)),
        master(table, tensor::DType::kFloat32),
        exp_avg(table, tensor::DType::kFloat32),
        exp_avg_sq(table, tensor::DType::kFloat32),
        partitions(static_cast<std::size_t>(3 * zero.partition_numel()) * sizeof(float),
                   tensor::Device{}) {
    state.table = &table;
    state.layout = layout;
    state.params = params.flat();
    if (has_zero_file(layout)) {
      const std::int64_t n = zero.partition_numel();
      const tensor::Tensor all = partitions.as(tensor::DType::kFloat32, tensor::Shape{3 * n});
      state.zero = &zero;
      state.master = all.narrow(0, n);
      state.exp_avg = all.narrow(n, n);
      state.exp_avg_sq = all.narrow(2 * n, n);
    } else {
      state.master = master.flat();
      state.exp_avg = exp_avg.flat();
      state.exp_avg_sq = exp_avg_sq.flat();
    }
    if (config.position_embedding == model::PositionEmbedding::kRotary) {
      state.rotary_head_dim = config.head_dim();
    }
  }

  model::ParamTable table;
  train::ZeroLayout zero;
  model::ParamBuffer params, master, exp_avg, exp_avg_sq;
  tensor::Buffer partitions;
  TrainingState state;
};

// Table-layout values written into `state_buffer`, which is table-layout too or, with a ZeRO
// layout, the partitions of one rank.
inline void store(const OwnedState& o, const model::ParamBuffer& values,
                  const tensor::Tensor& state_buffer) {
  if (o.state.zero == nullptr) {
    std::memcpy(state_buffer.raw(), values.flat().raw(), state_buffer.bytes());
    return;
  }
  std::int64_t offset = 0;
  for (std::size_t g = 0; g < o.zero.size(); ++g) {
    const std::int64_t n = o.zero[g].partition_numel;
    train::gather_partition(values.flat(), o.zero, g, 0, state_buffer.narrow(offset, n));
    offset += n;
  }
}

// A value per element that differs between buffers (`stream`) and positions, never zero.
inline float sample(std::uint32_t stream, std::int64_t i) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + stream * 40503u + 12345u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (static_cast<float>(x % 20000u) - 9999.5f) / 4096.0f;
}

// Fills the parameter slices (not the alignment gaps) of every buffer and sets the scalars.
inline void fill(OwnedState& o) {
  TrainingState& s = o.state;
  model::ParamBuffer master(o.table, tensor::DType::kFloat32);
  model::ParamBuffer exp_avg(o.table, tensor::DType::kFloat32);
  model::ParamBuffer exp_avg_sq(o.table, tensor::DType::kFloat32);
  for (const model::ParamSpec& p : o.table.params()) {
    for (std::int64_t j = p.offset; j < p.offset + p.local_numel(); ++j) {
      const float value = sample(1, j);
      switch (s.params.dtype()) {
        case tensor::DType::kFloat32:
          static_cast<float*>(s.params.raw())[j] = value;
          break;
        case tensor::DType::kBFloat16:
          static_cast<tensor::BFloat16*>(s.params.raw())[j] = tensor::to_bfloat16(value);
          break;
        default:
          static_cast<tensor::Float16*>(s.params.raw())[j] = tensor::to_float16(value);
          break;
      }
      master.flat().data<float>()[j] = sample(2, j);
      exp_avg.flat().data<float>()[j] = sample(3, j);
      exp_avg_sq.flat().data<float>()[j] = std::abs(sample(4, j));
    }
  }
  store(o, master, s.master);
  store(o, exp_avg, s.exp_avg);
  store(o, exp_avg_sq, s.exp_avg_sq);
  s.adam_step = 7;
  s.adam = {2.5e-4, 0.9, 0.95, 1e-8, 0.1};
  s.clip_grad = 1.0;
  s.loss_scaler = {true, 4096.0, 11, 5, 2.0, 500, 2.0, 2, 1, true, false};
  s.lr_scheduler = {6e-4, 16.0, 96, 0, 768, "cosine", 800, 6e-5};
  s.iteration = 12;
  s.global_steps = 12;
  s.global_samples = 96;
  s.skipped_steps = 1;
  s.consumed_train_samples = 96;
  s.consumed_valid_samples = 32;
  s.consumed_train_tokens = 768;
  s.padded_vocab_size = 64;
  s.original_vocab_size = 50;
  s.seed = 42;
  io::Value fields = io::Value::dict();
  fields.set("num_layers", io::Value::integer(2));
  fields.set("hidden_size", io::Value::integer(16));
  fields.set("iteration", io::Value::integer(0));
  s.args = io::Value::namespace_object(std::move(fields));
  s.ds_config = io::Value::dict();
  s.ds_config.set("train_batch_size", io::Value::integer(8));
}

inline bool same_bytes(const tensor::Tensor& a, const tensor::Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

inline bool all_zero(const tensor::Tensor& t) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw());
  for (std::size_t i = 0; i < t.bytes(); ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

}  // namespace mds::ckpt::testing
