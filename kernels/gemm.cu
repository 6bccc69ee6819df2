#include <cublasLt.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/bias_grad_kernels.cuh"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm.h"
#include "kernels/gemm_plan.cuh"
#include "kernels/launch.cuh"
#include "kernels/reduce_columns.cuh"
#include "kernels/timing_events.h"

namespace mds::kernels {

using detail::check_cublas;
using tensor::DType;

namespace {

void check_types(const GemmOptions& o) {
  const bool ok = o.output == DType::kFloat32 || o.output == o.input;
  if (!ok || (o.input == DType::kFloat32 && o.output != DType::kFloat32)) {
    base::fail("kernels::gemm: ", tensor::dtype_name(o.input), " inputs cannot write ",
               tensor::dtype_name(o.output), " (float32, or the inputs' own 16-bit type)");
  }
  if (o.math == GemmMath::kTf32 && o.input != DType::kFloat32) {
    base::fail("kernels::gemm: TF32 math applies to float32 inputs only");
  }
  const bool takes_bias = o.epilogue == GemmEpilogue::kBias ||
                          o.epilogue == GemmEpilogue::kBiasGelu ||
                          o.epilogue == GemmEpilogue::kBiasGeluAux;
  if (takes_bias != (o.bias != nullptr)) {
    base::fail("kernels::gemm: a bias pointer goes with a bias epilogue, and only with one");
  }
  if (o.batch < 1) base::fail("kernels::gemm: batch must be >= 1, got ", o.batch);
  if ((o.epilogue == GemmEpilogue::kBiasGeluAux) != (o.aux != nullptr)) {
    base::fail("kernels::gemm: an aux pointer goes with the GeLU-aux epilogue, and only with it");
  }
  if (o.aux != nullptr && o.batch != 1) {
    base::fail("kernels::gemm: the GeLU-aux epilogue takes no batch, got ", o.batch);
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's alignment preferences
// default to 256 bytes, which strided views (attention heads, offset slices) need not meet.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// 16-bit inputs write their own type; fp32 ones fp32, with the context's fp32 math.
GemmOptions options_for(const GemmContext& context, tensor::DType dtype) {
  GemmOptions options;
  options.input = dtype;
  options.output = dtype;
  if (dtype == DType::kFloat32) options.math = context.fp32_math();
  return options;
}

}  // namespace

GemmContext::GemmContext(std::size_t workspace_bytes)
    : plans_(std::make_unique<detail::GemmPlanCache>()), workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t handle = nullptr;
  check_cublas(cublasLtCreate(&handle), "kernels::GemmContext (cublasLtCreate)");
  handle_ = handle;
  if (workspace_bytes_ > 0) {
    const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
    if (status != cudaSuccess) {
      cublasLtDestroy(handle_);
      check_cuda(status, "kernels::GemmContext (workspace cudaMalloc)");
    }
  }
}

GemmContext::~GemmContext() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

std::size_t GemmContext::cached_plans() const {
  return plans_->size();
}

namespace {

// The plan of a GEMM with m, n > 0, checking what gemm() documents.
detail::GemmPlan& plan_of(GemmContext& context, std::int64_t m, std::int64_t n, std::int64_t k,
                          GemmOperand a, GemmOperand b, const void* c, std::int64_t ldc,
                          const GemmOptions& options) {
  // cuBLASLt rejects empty layouts; ops::cpu::gemm would only scale C then.
  if (k <= 0) base::fail("kernels::gemm: k must be > 0, got ", k);
  if (options.aux != nullptr && ldc % 8 != 0) {
    base::fail("kernels::gemm: the GeLU-aux epilogue needs ldc divisible by 8, got ", ldc);
  }
  const detail::GemmKey key{.m = m,
                            .n = n,
                            .k = k,
                            .lda = a.ld,
                            .ldb = b.ld,
                            .ldc = ldc,
                            .a_transposed = a.transposed,
                            .b_transposed = b.transposed,
                            .input = options.input,
                            .output = options.output,
                            .math = options.math,
                            .epilogue = options.epilogue,
                            .batch = options.batch,
                            .stride_a = options.stride_a,
                            .stride_b = options.stride_b,
                            .stride_c = options.stride_c,
                            .align_a = alignment_of(a.data),
                            .align_b = alignment_of(b.data),
                            .align_c = alignment_of(c),
                            .align_aux = options.aux != nullptr ? alignment_of(options.aux) : 0,
                            .workspace_bytes = context.workspace_bytes()};
  return context.plans().find_or_make(context.handle(), key);
}

// One GEMM call's operands, as gemm() takes them.
struct GemmCall {
  float alpha;
  GemmOperand a, b;
  float beta;
  void* c;
  std::int64_t ldc;
  const GemmOptions& options;
};

// Milliseconds a call of `plan` with each of `algorithms` (the plan left with the last).
std::vector<float> time_each(GemmContext& context, detail::GemmPlan& plan,
                             const std::vector<detail::GemmAlgorithm>& algorithms,
                             const GemmCall& call, int iters, cudaStream_t stream) {
  TimingEvents events("kernels::time_gemm_algorithms");
  std::vector<float> times;
  for (const detail::GemmAlgorithm& algorithm : algorithms) {
    plan.use(algorithm);
    times.push_back(events.per_call(
        [&] {
          plan.run(context.handle(), call.alpha, call.a.data, call.b.data, call.beta, call.c,
                   call.options.bias, call.options.aux, context.workspace(),
                   context.workspace_bytes(), stream);
        },
        iters, stream));
  }
  return times;
}

// The bytes from C's first element to its last: batch strides, then m rows of ldc.
std::size_t c_extent_bytes(std::int64_t m, std::int64_t n, const GemmCall& call) {
  const std::int64_t elements =
      (call.options.batch - 1) * call.options.stride_c + (m - 1) * call.ldc + n;
  return static_cast<std::size_t>(elements) * tensor::dtype_size(call.options.output);
}

// Settles the algorithm of a plan's first call (GemmContext::set_algorithm_choices): the one the
// choices hold, else the fastest of the heuristic's candidates timed on this call's operands.
// With beta ≠ 0 the timing runs accumulate onto C, so C is copied aside first and back after.
void settle_algorithm(GemmContext& context, detail::GemmPlan& plan, std::int64_t m, std::int64_t n,
                      const GemmCall& call, cudaStream_t stream) {
  constexpr int kTimedCalls = 10;
  ops::GemmAlgorithmChoices& choices = *context.algorithm_choices();
  const std::string key = detail::describe(plan.key());
  const std::vector<detail::GemmAlgorithm> candidates =
      plan.candidates(context.handle(), detail::GemmPlan::kMaxCandidates);
  std::optional<int> index = choices.find(key);
  if (!index) {
    const std::size_t bytes = call.beta != 0.0f ? c_extent_bytes(m, n, call) : 0;
    void* saved = nullptr;
    if (bytes > 0) {
      check_cuda(cudaMallocAsync(&saved, bytes, stream), "kernels::gemm (tuning: cudaMallocAsync)");
      check_cuda(cudaMemcpyAsync(saved, call.c, bytes, cudaMemcpyDeviceToDevice, stream),
                 "kernels::gemm (tuning: saving C)");
    }
    const std::vector<float> times =
        time_each(context, plan, candidates, call, kTimedCalls, stream);
    if (bytes > 0) {
      check_cuda(cudaMemcpyAsync(call.c, saved, bytes, cudaMemcpyDeviceToDevice, stream),
                 "kernels::gemm (tuning: restoring C)");
      check_cuda(cudaFreeAsync(saved, stream), "kernels::gemm (tuning: cudaFreeAsync)");
    }
    index = 0;  // the heuristic's own unless another is faster
    for (std::size_t i = 1; i < times.size(); ++i) {
      if (times[i] < times[static_cast<std::size_t>(*index)]) index = static_cast<int>(i);
    }
    choices.record(key, *index, times);
  }
  if (*index >= static_cast<int>(candidates.size())) {
    base::fail("kernels::gemm: the GEMM tuning file chose algorithm ", *index, " for ", key,
               ", but cuBLASLt offers ", candidates.size(), " now: remove the file to tune again");
  }
  plan.use(candidates[static_cast<std::size_t>(*index)]);
  plan.settle();
}

}  // namespace

std::string gemm_platform() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "kernels::gemm_platform (cudaGetDevice)");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device),
             "kernels::gemm_platform (cudaGetDeviceProperties)");
  return std::string(properties.name) + ", cuBLASLt " + std::to_string(cublasLtGetVersion());
}

void gemm(GemmContext& context, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          GemmOperand a, GemmOperand b, float beta, void* c, std::int64_t ldc,
          const GemmOptions& options, cudaStream_t stream) {
  check_types(options);
  if (m <= 0 || n <= 0) return;
  detail::GemmPlan& plan = plan_of(context, m, n, k, a, b, c, ldc, options);
  if (context.algorithm_choices() != nullptr && !plan.settled()) {
    settle_algorithm(context, plan, m, n, {alpha, a, b, beta, c, ldc, options}, stream);
  }
  plan.run(context.handle(), alpha, a.data, b.data, beta, c, options.bias, options.aux,
           context.workspace(), context.workspace_bytes(), stream);
}

std::vector<float> time_gemm_algorithms(GemmContext& context, std::int64_t m, std::int64_t n,
                                        std::int64_t k, float alpha, GemmOperand a, GemmOperand b,
                                        float beta, void* c, std::int64_t ldc,
                                        const GemmOptions& options, int max_algorithms, int iters,
                                        cudaStream_t stream) {
  check_types(options);
  if (m <= 0 || n <= 0 || max_algorithms <= 0 || iters <= 0) return {};
  // A plan of its own: the cached one keeps its choice.
  detail::GemmPlan plan(context.handle(), plan_of(context, m, n, k, a, b, c, ldc, options).key());
  return time_each(context, plan, plan.candidates(context.handle(), max_algorithms),
                   {alpha, a, b, beta, c, ldc, options}, iters, stream);
}

void linear_forward(GemmContext& context, void* out, const void* x, const void* weight,
                    const void* bias, tensor::DType dtype, std::int64_t m, std::int64_t n,
                    std::int64_t k, cudaStream_t stream) {
  GemmOptions options = options_for(context, dtype);
  if (bias != nullptr) {
    // cuBLASLt's bias vector has the output's type by default. With 16-bit outputs some of its
    // algorithms round the product to 16 bits before adding the bias (seen on an H100, CUDA
    // 13.0), so the result can be the twice-rounded one, as PyTorch's addmm through cuBLASLt.
    options.epilogue = GemmEpilogue::kBias;
    options.bias = bias;
  }
  gemm(context, m, n, k, 1.0f, {x, k, false}, {weight, k, true}, 0.0f, out, n, options, stream);
}

void linear_backward(GemmContext& context, void* dx, float* dweight, float* dbias, const void* dout,
                     const void* x, const void* weight, tensor::DType dtype, std::int64_t m,
                     std::int64_t n, std::int64_t k, ColumnSumScratch& scratch, cudaStream_t stream,
                     bool accumulate_dx, bool accumulate_dweight) {
  if (dx != nullptr && m > 0 && k > 0) {
    if (n > 0) {
      // beta = 1 on a 16-bit dx: cuBLASLt widens it and adds the product, rounded once or (some
      // algorithms, as with the bias above) twice; beta = 0 does not read dx.
      gemm(context, m, k, n, 1.0f, {dout, n, false}, {weight, k, false},
           accumulate_dx ? 1.0f : 0.0f, dx, k, options_for(context, dtype), stream);
    } else if (!accumulate_dx) {  // an empty product
      check_cuda(cudaMemsetAsync(dx, 0, static_cast<std::size_t>(m * k) * tensor::dtype_size(dtype),
                                 stream),
                 "kernels::linear_backward (cudaMemsetAsync)");
    }
  }
  if (dweight != nullptr && n > 0 && k > 0) {
    if (m > 0) {
      GemmOptions fp32_out = options_for(context, dtype);
      fp32_out.output = tensor::DType::kFloat32;
      gemm(context, n, k, m, 1.0f, {dout, n, true}, {x, k, false}, accumulate_dweight ? 1.0f : 0.0f,
           dweight, k, fp32_out, stream);
    } else if (!accumulate_dweight) {  // an empty sum
      check_cuda(
          cudaMemsetAsync(dweight, 0, static_cast<std::size_t>(n * k) * sizeof(float), stream),
          "kernels::linear_backward (cudaMemsetAsync)");
    }
  }
  if (dbias != nullptr && n > 0) {
    detail::with_storage(dtype, "linear_backward", [&](auto s) {
      bias_grad_detail::with_bias_grad_kernel<decltype(s)::value>(
          m, n, dout, [&](auto kernel, const detail::LaunchShape& shape) {
            detail::launch_column_sums<1>("kernels::linear_backward (dbias)", kernel, shape, m, n,
                                          {{dbias}}, scratch, stream, dout, m, n);
          });
    });
  }
}

void batched_matmul(GemmContext& context, void* out, const void* a, const void* b,
                    tensor::DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n,
                    std::int64_t k, bool transpose_a, bool transpose_b, float alpha, float beta,
                    cudaStream_t stream) {
  if (batch <= 0) return;
  GemmOptions options = options_for(context, dtype);
  options.batch = batch;
  options.stride_a = m * k;
  options.stride_b = k * n;
  options.stride_c = m * n;
  const std::int64_t lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
  gemm(context, m, n, k, alpha, {a, lda, transpose_a}, {b, ldb, transpose_b}, beta, out, n, options,
       stream);
}

}  // namespace mds::kernels
