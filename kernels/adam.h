// CUDA twins of ops/cpu/adam.h over flat fp32 device buffers, work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/scratch.h"
#include "kernels/sum_of_squares_partials.h"
#include "ops/adam.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// apex FusedAdam (adam_w_mode, bias correction) statement by statement as ops/cpu/adam.cpp;
// bias_correction1/2 = 1 − β^step computed by the caller in double and rounded to float.
void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                float bias_correction2, cudaStream_t stream);
// The same step, and the new weights rounded to `low_dtype` (bf16 or fp16, round to nearest even
// as kernels::cast) into `low` in the same pass: the 16-bit wrappers' master → params copy.
void adamw_step_and_cast(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                         float bias_correction2, void* low, tensor::DType low_dtype,
                         cudaStream_t stream);

// Σ x² in double for the global gradient norm, deterministic: kSumOfSquaresPartials blocks each
// sum a fixed set of elements into partials[block] (pass 1), one block adds those in a fixed
// order into *result (pass 2). The split depends only on n, never on the GPU
// (kSumOfSquaresPartials, sum_of_squares_partials.h).
// result: one device double; partials: kSumOfSquaresPartials device doubles of workspace.
void sum_of_squares(double* result, double* partials, const float* x, std::int64_t n,
                    cudaStream_t stream);
// The same, returned to the host: the workspace in `scratch` (or a stream-ordered allocation when
// null), then a wait.
double sum_of_squares(const float* x, std::int64_t n, cudaStream_t stream,
                      Scratch* scratch = nullptr);

}  // namespace mds::kernels
