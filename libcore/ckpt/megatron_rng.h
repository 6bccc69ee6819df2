// The RNG states Megatron saves with every checkpoint (checkpoints.md §1.2): Python's random,
// numpy's legacy RandomState, torch's CPU generator, the current CUDA generator and the tensor-
// parallel CUDA tracker. mds's own randomness is counter-based and needs none of them to resume,
// so they are written as Megatron's seeding leaves them (so upstream can load the files) and only
// checked for form when read.
#pragma once

#include <cstdint>

#include "ckpt/pt_builder.h"
#include "io/pickle_value.h"

namespace mds::ckpt {

// Adds random_rng_state, np_rng_state, torch_rng_state, cuda_rng_state and rng_tracker_states
// to `dict` for Megatron's _set_random_seed(seed) on pipeline rank `pp_rank` and tensor rank
// `tp_rank`: random.seed(s), np.random.seed(s), torch.manual_seed(s) with s = seed + 100·pp, and
// the tracker's "model-parallel-rng" seeded with s + 2718 + tp.
void add_megatron_rng_states(io::Value& dict, std::uint64_t seed, std::int64_t tp_rank,
                             std::int64_t pp_rank, PtBuilder& builder);

// Fails unless `root` holds the five keys in the forms torch.load and Megatron's setters accept.
void check_megatron_rng_states(const io::ValueRef& root);

}  // namespace mds::ckpt
