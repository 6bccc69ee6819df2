// The global gradient norm and the clipping factors of the four DeepSpeed paths (training.md §5.3,
// §4.4, §4.5), over an fp32 gradient buffer laid out by a ParamTable (padding is zero).
//
// Every upstream path sums per-parameter squares on the host, stores the sum in a one-element fp32
// tensor (for the model-parallel all-reduce, done even without one) and takes `** 0.5` of it; the
// paths differ in which parameters count, in whether the sum is taken per optimizer group, and in
// what they do with a non-finite result. Sums here are in double in table order (each parameter's
// own sum in the fixed blocked order of ops::sum_of_squares), so they do not depend on threads.
#pragma once

#include <cstdint>

#include "dist/communicator.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::train {

enum class NormRule {
  // Engine.clip_fp32_gradients → utils.clip_grad_norm_ (fp32, no wrapper): every parameter
  // (upstream counts the tied replica too; mds does not, see below); the root is rounded to fp32
  // again by the DP averaging; no -1 for inf/NaN.
  kFp32Engine,
  // FP16_Optimizer (fp16, ZeRO 0): get_grad_norm over the flat fp32 group copies, which carry no
  // pipe-replica flag, so upstream counts the tied replica; mds does not (see below).
  kFp16Optimizer,
  // DeepSpeedZeroOptimizer (fp16, ZeRO 1): one norm per group (replica skipped), each rounded
  // through fp32, combined as sqrt(Σ norm_g²).
  kZero,
  // BF16_Optimizer: get_global_norm_of_tensors over the fp32 gradients, replica skipped.
  kBf16,
};

// The norm upstream's function returns for `grads` (fp32, table.buffer_numel() elements), except
// that the last pipeline stage's tied replica is skipped by every rule (training.md §5.3: a norm
// over the unique gradient elements, so that it does not depend on P): -1 when
// it is inf or NaN (except kFp32Engine, which passes inf/NaN on). For fp16 the gradients are still
// scaled: this is the scaled norm. With TP, replicated parameters count on TP rank 0 only; with a
// model-parallel group (DeepSpeed's P×T group of this data-parallel replica) each sum of squares
// is all-reduced over it as the fp32 tensor upstream reduces, before the root.
// `grads` may live on ctx's CUDA device: the per-parameter sums of squares run there and come
// back to the host in one copy (ops::sums_of_squares), where they are added in table order.
double global_grad_norm(const ops::DeviceContext& ctx, const model::ParamTable& table,
                        tensor::Tensor grads, NormRule rule,
                        dist::Communicator* model_parallel = nullptr);
double global_grad_norm(const model::ParamTable& table, tensor::Tensor grads, NormRule rule,
                        dist::Communicator* model_parallel = nullptr);

// clip_grad_norm_ / clip_tensors_by_global_norm: max_norm / (norm + 1e-6), applied when < 1.
double clip_coefficient(double max_norm, double norm);

// unscale_and_clip_grads of FP16_Optimizer and ZeRO: the factor the scaled gradients are divided
// by, loss_scale · max(1, (scaled_norm/loss_scale + 1e-6)/clip) when clip > 0, else loss_scale.
double combined_unscale_factor(double loss_scale, double scaled_norm, double max_norm);

// grads *= factor, with the factor rounded to fp32 first as PyTorch does for `mul_(python float)`
// on an fp32 tensor.
void scale_gradients(const ops::DeviceContext& ctx, tensor::Tensor grads, double factor);
void scale_gradients(tensor::Tensor grads, double factor);

}  // namespace mds::train
