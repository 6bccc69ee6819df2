// CUDA twins of ops/cpu/cross_entropy.h over logits [n, v] (this rank's vocab shard starting at
// global column vocab_start): device pointers, work queued on `stream`. Row kernels run one block
// per row. The steps stay separate for the vocab-parallel loss (a TP all-reduce goes between
// them); cross_entropy_forward fuses steps 1–4 for an unsharded vocabulary.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/scratch.h"
#include "ops/launch_variants.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// 1. max[i] = max_j logits[i, j] (NaNs skipped as on the CPU).
void cross_entropy_row_max(float* max, const float* logits, std::int64_t n, std::int64_t v,
                           cudaStream_t stream);
// 2. target_logit[i] = logits[i, targets[i] − vocab_start] − max[i] if in this shard, else 0.
void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start, cudaStream_t stream);
// 3. logits[i, j] ← exp(logits[i, j] − max[i]) in place; sum_exp[i] = their sum.
void cross_entropy_exp_sum(float* sum_exp, float* logits, const float* max, std::int64_t n,
                           std::int64_t v, cudaStream_t stream);
// 4. loss[i] = log(sum_exp[i]) − target_logit[i].
void cross_entropy_loss(float* loss, const float* sum_exp, const float* target_logit,
                        std::int64_t n, cudaStream_t stream);
// Steps 1–4 in one kernel (vocab_start = 0): writes loss, max and sum_exp [n] and leaves logits
// holding exp(logits − max) for the backward. The row is read three times, written once.
void cross_entropy_forward(float* loss, float* max, float* sum_exp, float* logits,
                           const std::int64_t* targets, std::int64_t n, std::int64_t v,
                           cudaStream_t stream);
// dlogits[i, j] = (exp_logits[i, j] / sum_exp[i] − [j + vocab_start == targets[i]]) · dloss[i];
// writes, and dlogits may be exp_logits itself.
void cross_entropy_backward(float* dlogits, const float* exp_logits, const std::int64_t* targets,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start, cudaStream_t stream);

// The same with logits (and dlogits) of `dtype` (kFloat32, kBFloat16 or kFloat16), widened
// exactly on load; max, sums, target logits and losses stay fp32, and the fp32 dtype is the
// functions above. 16-bit logits are never overwritten: exp_sum and forward only read them, and
// the backward recomputes exp(logit − max) with the forward's expression (so it needs max; for
// fp32 max is not read) and writes the gradient rounded once into the 16-bit dlogits, which may
// be the logits themselves. Results are bit for bit the fp32 kernels' on the widened logits, the
// gradient rounded once.
void cross_entropy_row_max(float* max, const void* logits, tensor::DType dtype, std::int64_t n,
                           std::int64_t v, cudaStream_t stream);
void cross_entropy_target_logit(float* target_logit, const void* logits, tensor::DType dtype,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start, cudaStream_t stream);
void cross_entropy_exp_sum(float* sum_exp, void* logits, tensor::DType dtype, const float* max,
                           std::int64_t n, std::int64_t v, cudaStream_t stream);
void cross_entropy_forward(float* loss, float* max, float* sum_exp, void* logits,
                           tensor::DType dtype, const std::int64_t* targets, std::int64_t n,
                           std::int64_t v, cudaStream_t stream);
void cross_entropy_backward(void* dlogits, const void* logits, tensor::DType dtype,
                            const std::int64_t* targets, const float* max, const float* sum_exp,
                            const float* dloss, std::int64_t n, std::int64_t v,
                            std::int64_t vocab_start, cudaStream_t stream);

// cross_entropy_forward then cross_entropy_backward in one kernel, for an unsharded vocabulary
// (vocab_start = 0) whose dloss is known before the forward (a training step's): writes loss [n]
// and the gradient into dlogits, which may be logits itself; max and sum_exp stay inside. The
// same bits as the two kernels; fp32 logits are not overwritten with exps (the gradient pass
// recomputes them, the same bits). Each row crosses DRAM about once each way: few rows are in
// flight at a time, so the gradient pass finds its row in L2.
// With `variants` and 16-bit logits, the call runs as picked there for its problem
// (ops/launch_variants.h): the first call times the one kernel, the one kernel with twice the
// blocks an SM, and the forward and backward kernels (max and sum_exp in `scratch`, or a
// stream-ordered allocation when null) on its first rows into scratch outputs, and keeps the
// fastest whose bits are the one kernel's.
void cross_entropy_forward_backward(float* loss, void* dlogits, const void* logits,
                                    tensor::DType dtype, const std::int64_t* targets,
                                    const float* dloss, std::int64_t n, std::int64_t v,
                                    cudaStream_t stream,
                                    ops::LaunchVariantChoices* variants = nullptr,
                                    Scratch* scratch = nullptr);

}  // namespace mds::kernels
