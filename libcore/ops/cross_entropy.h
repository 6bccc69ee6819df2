// Softmax cross entropy over (a shard of) the vocabulary, as megatron/mpu/cross_entropy.py
// (training.md §1.6), fp32. The steps are separate so that the vocab-parallel loss can reduce
// between them over the TP group; at TP = 1 cross_entropy_forward runs them in a row:
//   1. cross_entropy_row_max        → all-reduce MAX
//   2. cross_entropy_target_logit   → all-reduce SUM (ranks not owning the target contribute 0)
//   3. cross_entropy_exp_sum        → all-reduce SUM
//   4. cross_entropy_loss
// Shapes: logits [N, Vl] (any leading dims flattened to N tokens, Vl = this rank's vocab columns
// starting at global column vocab_start); targets [N] int64 global ids; max, target_logit, sum_exp,
// loss, dloss [N] fp32.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace mds::ops {

void cross_entropy_row_max(tensor::Tensor max, tensor::Tensor logits);
// target_logit[n] = logits[n, targets[n] − vocab_start] − max[n] if this shard holds the target,
// else 0. Targets outside [0, vocab_start + Vl) on the last shard are the caller's to reject;
// here a negative target fails.
void cross_entropy_target_logit(tensor::Tensor target_logit, tensor::Tensor logits,
                                tensor::Tensor targets, tensor::Tensor max,
                                std::int64_t vocab_start = 0);
// Replaces logits[n, j] by exp(logits[n, j] − max[n]) and sets sum_exp[n] to their sum. The
// backward needs only these exponentials, so it does not compute them again (the logits are not
// needed after step 2).
void cross_entropy_exp_sum(tensor::Tensor sum_exp, tensor::Tensor logits, tensor::Tensor max);
// loss[n] = log(sum_exp[n]) − target_logit[n].
void cross_entropy_loss(tensor::Tensor loss, tensor::Tensor sum_exp, tensor::Tensor target_logit);

// Steps 1–4 for an unsharded vocabulary (max is a workspace). Leaves the logits tensor holding
// exp(logits − max) and sum_exp its row sums, for the backward.
void cross_entropy_forward(tensor::Tensor loss, tensor::Tensor max, tensor::Tensor sum_exp,
                           tensor::Tensor logits, tensor::Tensor targets);

// dlogits[n, j] = (softmax[n, j] − [j + vocab_start == targets[n]]) · dloss[n], the softmax being
// exp_logits / sum_exp as step 3 left them. Unlike other backwards this writes (does not add),
// and dlogits may be the exp_logits tensor itself, saving a [N, V] buffer.
void cross_entropy_backward(tensor::Tensor dlogits, tensor::Tensor exp_logits,
                            tensor::Tensor targets, tensor::Tensor sum_exp, tensor::Tensor dloss,
                            std::int64_t vocab_start = 0);

// Micro-batch loss Σ loss·mask / Σ mask (training.md §1.6.4); the sums run in token order in
// double (closer to exact than upstream's fp32 tree sum, and thread-independent).
float masked_mean_loss(tensor::Tensor loss, tensor::Tensor mask);
// dloss[n] = grad · mask[n] / Σ mask (overwrites dloss).
void masked_mean_loss_backward(tensor::Tensor dloss, tensor::Tensor mask, float grad);

}  // namespace mds::ops
