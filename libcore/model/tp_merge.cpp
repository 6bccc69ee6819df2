#include "model/tp_merge.h"

#include <algorithm>

#include "base/error.h"

namespace mds::model {

void merge_tp_shard(const ParamBuffer& shard, std::int64_t tensor_parallel_size,
                    const ParamBuffer& full) {
  if (shard.dtype() != tensor::DType::kFloat32 || full.dtype() != tensor::DType::kFloat32) {
    base::fail("merge_tp_shard: both buffers must be fp32");
  }
  const ParamTable& shard_table = shard.table();
  const ParamTable& full_table = full.table();
  const std::int64_t rank = shard_table.tp_rank();
  for (std::size_t i = 0; i < shard_table.size(); ++i) {
    const ParamSpec& spec = shard_table[i];
    if (spec.tied_replica) continue;
    const std::size_t target = full_table.index_of(spec.layer, spec.name);
    const tensor::Shape& whole = full_table[target].local_shape;
    if (!(whole == spec.full_shape)) {
      base::fail("merge_tp_shard: ", spec.engine_name(), " is ", whole.to_string(),
                 " in the full model but its shards come from ", spec.full_shape.to_string());
    }
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

}  // namespace mds::model
