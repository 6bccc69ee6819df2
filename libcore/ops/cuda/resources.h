// What a CUDA DeviceContext owns (ops/device_context.h), for ops/cuda/*.cpp only: this header
// needs the CUDA runtime.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/column_sum_scratch.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "ops/device_context.h"
#include "ops/gemm_tuning_file.h"
#include "ops/launch_variants.h"

namespace mds::ops::cuda {

struct Resources {
  // Makes the device current, then creates the handle, its workspace and the stream there; with
  // `tf32` the GEMMs of fp32 operands round them to TF32 (ops::Fp32Matmul::kTf32).
  Resources(int device_index, bool tf32);
  ~Resources();
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  int device;
  kernels::GemmContext gemm;
  // A blocking stream (cudaStreamCreate): tensor::copy's legacy-default-stream copies are then
  // ordered with its kernels without explicit events.
  cudaStream_t stream = nullptr;
  // Host copies of per-token values that the loss hands to the host.
  std::vector<float> staging;
  // Device memory ops borrow for their queued work (the embedding's sort, the attention
  // backward's row deltas and dSᵀ, the norms' partials, cast_pieces' table).
  kernels::Scratch scratch;
  // The column sums' partials and arrival counters (bias and LayerNorm parameter gradients).
  kernels::ColumnSumScratch column_sums;
  // The GEMM algorithm choices `gemm` takes (DeviceContext::tune_gemms); null: the heuristic's.
  std::unique_ptr<GemmTuningFile> gemm_choices;
  // The launch shapes picked by timing (DeviceContext::time_kernel_shapes); null: the defaults.
  std::unique_ptr<LaunchVariantChoices> kernel_shapes;
};

inline cudaStream_t stream_of(const DeviceContext& ctx) {
  return ctx.cuda().stream;
}

}  // namespace mds::ops::cuda
