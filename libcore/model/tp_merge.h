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

}  // namespace mds::model
