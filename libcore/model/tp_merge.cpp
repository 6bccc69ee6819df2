#include "model/tp_merge.h"

#include <algorithm>

#include "base/error.h"

namespace mds::model {

namespace {

void check_fp32(const ParamBuffer& a, const ParamBuffer& b, const char* who) {
  if (a.dtype() != tensor::DType::kFloat32 || b.dtype() != tensor::DType::kFloat32) {
    base::fail(who, ": both buffers must be fp32");
  }
}

// The full table's entry of a shard's parameter, whose unsharded shape it must have.
std::size_t full_index(const ParamTable& full_table, const ParamSpec& spec, const char* who) {
  const std::size_t target = full_table.index_of(spec.layer, spec.name);
  const tensor::Shape& whole = full_table[target].local_shape;
  if (!(whole == spec.full_shape)) {
    base::fail(who, ": ", spec.engine_name(), " is ", whole.to_string(),
               " in the full model but its shards come from ", spec.full_shape.to_string());
  }
  return target;
}

}  // namespace

void merge_tp_shard(const ParamBuffer& shard, std::int64_t tensor_parallel_size,
                    const ParamBuffer& full) {
  check_fp32(shard, full, "merge_tp_shard");
  const ParamTable& shard_table = shard.table();
  const std::int64_t rank = shard_table.tp_rank();
  for (std::size_t i = 0; i < shard_table.size(); ++i) {
    const ParamSpec& spec = shard_table[i];
    if (spec.tied_replica) continue;
    const std::size_t target = full_index(full.table(), spec, "merge_tp_shard");
    const float* in = shard.view(i).host_span<float>().data();
    float* out = full.view(target).host_span<float>().data();
    const std::int64_t n = spec.local_numel();
    switch (spec.split) {
      case TpSplit::kReplicated:
        std::copy(in, in + n, out);
        break;
      case TpSplit::kColumn:
      case TpSplit::kVocab:
        std::copy(in, in + n, out + rank * n);
        break;
      case TpSplit::kRow: {
        const std::int64_t rows = spec.local_shape[0], cols = spec.local_shape[1];
        for (std::int64_t r = 0; r < rows; ++r) {
          std::copy(in + r * cols, in + (r + 1) * cols,
                    out + r * cols * tensor_parallel_size + rank * cols);
        }
        break;
      }
    }
  }
}

void split_tp_shard(const ParamBuffer& full, std::int64_t tensor_parallel_size,
                    const ParamBuffer& shard) {
  check_fp32(shard, full, "split_tp_shard");
  const ParamTable& shard_table = shard.table();
  const std::int64_t rank = shard_table.tp_rank();
  for (std::size_t i = 0; i < shard_table.size(); ++i) {
    const ParamSpec& spec = shard_table[i];
    const std::size_t source = full_index(full.table(), spec, "split_tp_shard");
    const float* in = full.view(source).host_span<float>().data();
    float* out = shard.view(i).host_span<float>().data();
    const std::int64_t n = spec.local_numel();
    switch (spec.split) {
      case TpSplit::kReplicated:
        std::copy(in, in + n, out);
        break;
      case TpSplit::kColumn:
      case TpSplit::kVocab:
        std::copy(in + rank * n, in + (rank + 1) * n, out);
        break;
      case TpSplit::kRow: {
        const std::int64_t rows = spec.local_shape[0], cols = spec.local_shape[1];
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* row = in + r * cols * tensor_parallel_size + rank * cols;
          std::copy(row, row + cols, out + r * cols);
        }
        break;
      }
    }
  }
}

}  // namespace mds::model
