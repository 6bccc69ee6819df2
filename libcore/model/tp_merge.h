#pragma once
#include <cstdint>

#include "model/param_buffer.h"

namespace mds::model {

// Writes one TP rank's shard of every parameter into its place in the unsharded model: the
// inverse of the split of training.md §2.2 (column and vocabulary shards are row blocks, row
// shards column blocks; replicated parameters are copied from every shard, identical on each).
// Both buffers are fp32; `full` is laid out by the T = 1 table of the same model (same padded
// vocabulary), `shard` by the table of TP rank shard.table().tp_rank(). Parameters are matched by
// (layer, name); one missing from the full table fails naming it.
void merge_tp_shard(const ParamBuffer& shard, std::int64_t tensor_parallel_size,
                    const ParamBuffer& full);

// The inverse: fills every parameter of `shard` (the table of TP rank shard.table().tp_rank() of
// tensor_parallel_size, any pipeline stage, the last stage's tied embedding copy included) with its
// block of the unsharded model `full` (fp32, T = 1 table of the same model). Parameters are matched
// by (layer, name); one missing from the full table fails naming it.
void split_tp_shard(const ParamBuffer& full, std::int64_t tensor_parallel_size,
                    const ParamBuffer& shard);

}  // namespace mds::model
