// Softmax cross entropy over (a shard of) the vocabulary, as megatron/mpu/cross_entropy.py
// (training.md §1.6). The steps are separate so that the vocab-parallel loss can reduce between
// them over the TP group; at TP = 1 cross_entropy_forward runs them in a row:
//   1. cross_entropy_row_max        → all-reduce MAX
//   2. cross_entropy_target_logit   → all-reduce SUM (ranks not owning the target contribute 0)
//   3. cross_entropy_exp_sum        → all-reduce SUM
//   4. cross_entropy_loss
// Shapes: logits [N, Vl] (any leading dims flattened to N tokens, Vl = this rank's vocab columns
// starting at global column vocab_start); targets [N] int64 global ids; max, target_logit, sum_exp,
// loss, dloss [N] fp32.
//
// Logits (and dlogits) are fp32, bfloat16 or float16 (ops/activation_dtype.h); everything per
// token stays fp32. 16-bit logits are widened exactly on load and the fp32 arithmetic follows,
// as upstream's logits.float() would give: max, target logit, sum_exp and loss are bit for bit
// those of the fp32 op on the widened logits, and the gradient is that op's fp32 gradient rounded
// once (what .float()'s backward hands the 16-bit GEMM), without an fp32 copy of the logits.
// What the forward leaves differs: fp32 logits are overwritten with exp(logit − max), which the
// backward reads; 16-bit logits are left as they are and the backward recomputes the exps from
// them and max (exps rounded to 16 bits would change the gradient).
//
// Each op takes the DeviceContext it runs with (ops/device_context.h) and has an overload without
// one for host tensors. Host targets are range-checked; device targets are not read back (the
// caller checks them where they came from).
#pragma once
#include <cstdint>

#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::ops {

void cross_entropy_row_max(const DeviceContext& ctx, tensor::Tensor max, tensor::Tensor logits);
// target_logit[n] = logits[n, targets[n] − vocab_start] − max[n] if this shard holds the target,
// else 0. Targets outside [0, vocab_start + Vl) on the last shard are the caller's to reject;
// here a negative target fails.
void cross_entropy_target_logit(const DeviceContext& ctx, tensor::Tensor target_logit,
                                tensor::Tensor logits, tensor::Tensor targets, tensor::Tensor max,
                                std::int64_t vocab_start = 0);
// Sets sum_exp[n] to Σ_j exp(logits[n, j] − max[n]). fp32 logits are replaced by these
// exponentials, so that the backward does not compute them again (the logits are not needed after
// step 2); 16-bit logits are left unchanged.
void cross_entropy_exp_sum(const DeviceContext& ctx, tensor::Tensor sum_exp, tensor::Tensor logits,
                           tensor::Tensor max);
// loss[n] = log(sum_exp[n]) − target_logit[n].
void cross_entropy_loss(const DeviceContext& ctx, tensor::Tensor loss, tensor::Tensor sum_exp,
                        tensor::Tensor target_logit);

// Steps 1–4 for an unsharded vocabulary. Leaves max and sum_exp for the backward, and fp32 logits
// holding exp(logits − max) (16-bit ones unchanged).
void cross_entropy_forward(const DeviceContext& ctx, tensor::Tensor loss, tensor::Tensor max,
                           tensor::Tensor sum_exp, tensor::Tensor logits, tensor::Tensor targets);

// dlogits[n, j] = (softmax[n, j] − [j + vocab_start == targets[n]]) · dloss[n]. `logits` is the
// logits tensor as the forward left it: for fp32 the exps step 3 wrote (softmax = logits /
// sum_exp; max is not read), for 16-bit the logits themselves (softmax = exp(logits − max) /
// sum_exp, the exps recomputed exactly as step 3 computed them). dlogits has the logits' dtype.
// Unlike other backwards this writes (does not add), and dlogits may be the logits tensor itself,
// saving an [N, V] buffer.
void cross_entropy_backward(const DeviceContext& ctx, tensor::Tensor dlogits, tensor::Tensor logits,
                            tensor::Tensor targets, tensor::Tensor max, tensor::Tensor sum_exp,
                            tensor::Tensor dloss, std::int64_t vocab_start = 0);

// cross_entropy_forward then cross_entropy_backward for an unsharded vocabulary, where dloss is
// known before the forward (a training step's, ops::masked_mean_loss_backward of the mask):
// writes loss [N] and dlogits (the logits' dtype and shape; may be the logits tensor itself),
// bit for bit what the two ops write. On a device one kernel that reads each row from DRAM once
// (max and sum_exp never leave it; fp32 logits are not overwritten with exps), or, for 16-bit
// logits where the context times kernel shapes (DeviceContext::time_kernel_shapes), whichever of
// its same-bits variants was fastest. On the host the two ops in a row. Either way the logits are
// spent unless 16-bit and apart from dlogits.
void cross_entropy_forward_backward(const DeviceContext& ctx, tensor::Tensor loss,
                                    tensor::Tensor dlogits, tensor::Tensor logits,
                                    tensor::Tensor targets, tensor::Tensor dloss);

// Micro-batch loss Σ loss·mask / Σ mask (training.md §1.6.4); the sums run in token order in
// double (closer to exact than upstream's fp32 tree sum, and thread-independent). On a device the
// per-token values are copied to the host for that sum (it waits for the context's stream).
float masked_mean_loss(const DeviceContext& ctx, tensor::Tensor loss, tensor::Tensor mask);
// Σ mask in token order in double, the divisor of the two below (on a device: copied to the
// host and summed there, a wait).
double loss_mask_sum(const DeviceContext& ctx, tensor::Tensor mask);
// dloss[n] = grad · mask[n] / Σ mask (overwrites dloss): the quotient rounded to fp32 once, the
// products in fp32.
void masked_mean_loss_backward(const DeviceContext& ctx, tensor::Tensor dloss, tensor::Tensor mask,
                               float grad);
// The same with Σ mask given (loss_mask_sum of the host copy of the mask): on a device one
// kernel and no wait.
void masked_mean_loss_backward(const DeviceContext& ctx, tensor::Tensor dloss, tensor::Tensor mask,
                               float grad, double mask_sum);

// The same on host tensors.
void cross_entropy_row_max(tensor::Tensor max, tensor::Tensor logits);
void cross_entropy_target_logit(tensor::Tensor target_logit, tensor::Tensor logits,
                                tensor::Tensor targets, tensor::Tensor max,
                                std::int64_t vocab_start = 0);
void cross_entropy_exp_sum(tensor::Tensor sum_exp, tensor::Tensor logits, tensor::Tensor max);
void cross_entropy_loss(tensor::Tensor loss, tensor::Tensor sum_exp, tensor::Tensor target_logit);
void cross_entropy_forward(tensor::Tensor loss, tensor::Tensor max, tensor::Tensor sum_exp,
                           tensor::Tensor logits, tensor::Tensor targets);
void cross_entropy_backward(tensor::Tensor dlogits, tensor::Tensor logits, tensor::Tensor targets,
                            tensor::Tensor max, tensor::Tensor sum_exp, tensor::Tensor dloss,
                            std::int64_t vocab_start = 0);
void cross_entropy_forward_backward(tensor::Tensor loss, tensor::Tensor dlogits,
                                    tensor::Tensor logits, tensor::Tensor targets,
                                    tensor::Tensor dloss);
float masked_mean_loss(tensor::Tensor loss, tensor::Tensor mask);
double loss_mask_sum(tensor::Tensor mask);
void masked_mean_loss_backward(tensor::Tensor dloss, tensor::Tensor mask, float grad);

}  // namespace mds::ops
