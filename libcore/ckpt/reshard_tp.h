// The tensor-parallel rules of merge-mp-partitions beyond model/tp_merge.h's merge and split
// (training.md §2.2): replicated parameters must agree on every TP rank, and the word embedding's
// padded rows follow the padded vocabulary of the target TP size.
#pragma once
#include <functional>
#include <string>

#include "model/param_buffer.h"

namespace mds::ckpt {

// Fails unless every replicated parameter of `shard` (LayerNorms, row-parallel biases, position
// table) is bit-identical to the same parameter of `rank0` (TP rank 0 of the same model, same
// dtype). The message names the file the shard's copy came from (`file_of`) and the key:
// "<folder>/layer_03-model_01-model_states.pt: input_layernorm.weight differs from TP rank 0's
// copy in 3 of 32 elements (...)".
void check_tp_replicas_equal(const model::ParamBuffer& rank0, const model::ParamBuffer& shard,
                             const std::function<std::string(const model::ParamSpec&)>& file_of);

// Copies every parameter of `from` into `to`, two unsharded (T = 1) fp32 models that differ at
// most in their padded vocabulary: the word embedding keeps its first min(Vp, Vp') rows and
// rows past the source's padded size are zero (upstream's universal checkpoints re-pad the same
// way; the padded rows are dummies, but they take part in the softmax normalizer).
void copy_resizing_vocabulary(const model::ParamBuffer& from, const model::ParamBuffer& to);

}  // namespace mds::ckpt
