#include <cublasLt.h>

#include <cstdint>

#include "base/error.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm.h"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels {

using tensor::DType;

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    base::fail("cublasLt: ", what, ": ", cublasLtGetStatusName(status), " (",
               cublasLtGetStatusString(status), ")");
  }
}

// Owners of the per-call descriptors, so that a failure half-way leaks nothing.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  explicit MatmulDesc(cublasComputeType_t compute) {
    check_cublas(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "kernels::gemm (desc)");
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(desc); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value),
                 "kernels::gemm (desc attribute)");
  }
};

// A column-major rows × cols layout with leading dimension ld, batched when batch > 1.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
         std::int64_t batch, std::int64_t stride) {
    check_cublas(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                            static_cast<std::uint64_t>(cols), ld),
                 "kernels::gemm (layout)");
    if (batch > 1) {
      const auto count = static_cast<std::int32_t>(batch);
      check_cublas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof count),
                   "kernels::gemm (batch count)");
      check_cublas(cublasLtMatrixLayoutSetAttribute(
                       layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                   "kernels::gemm (batch stride)");
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct Preference {
  cublasLtMatmulPreference_t preference = nullptr;
  Preference() {
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "kernels::gemm (preference)");
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(preference); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value),
                 "kernels::gemm (preference attribute)");
  }
};

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    default:
      base::fail("kernels::gemm: dtype ", tensor::dtype_name(dtype),
                 " is not float32, bfloat16 or float16");
  }
}

void check_types(const GemmOptions& o) {
  const bool ok = o.output == DType::kFloat32 || o.output == o.input;
  if (!ok || (o.input == DType::kFloat32 && o.output != DType::kFloat32)) {
    base::fail("kernels::gemm: ", tensor::dtype_name(o.input), " inputs cannot write ",
               tensor::dtype_name(o.output), " (float32, or the inputs' own 16-bit type)");
  }
  if (o.math == GemmMath::kTf32 && o.input != DType::kFloat32) {
    base::fail("kernels::gemm: TF32 math applies to float32 inputs only");
  }
  if ((o.epilogue != GemmEpilogue::kNone) != (o.bias != nullptr)) {
    base::fail("kernels::gemm: a bias pointer goes with a bias epilogue, and only with one");
  }
  if (o.batch < 1) base::fail("kernels::gemm: batch must be >= 1, got ", o.batch);
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's alignment preferences
// default to 256 bytes, which strided views (attention heads, offset slices) need not meet.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// Column sums for dbias, rows in a fixed order (reduce_columns.cuh).
__global__ void bias_grad_kernel(float* dbias, const float* dout, std::int64_t rows,
                                 std::int64_t cols) {
  detail::sum_columns<1>(
      rows, cols,
      [&](std::int64_t, std::int64_t, std::int64_t i, float* sums) { sums[0] += dout[i]; },
      [&](std::int64_t c, const float* total) { dbias[c] += total[0]; });
}

}  // namespace

GemmContext::GemmContext(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
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

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix read
// column-major is its transpose. So cuBLASLt multiplies our B (as its "A") by our A (as its "B")
// into an n × m column-major C: an operand stored untransposed is already op(X)ᵀ (CUBLAS_OP_N,
// stored as cols × rows); a transposed one needs CUBLAS_OP_T.
void gemm(GemmContext& context, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          GemmOperand a, GemmOperand b, float beta, void* c, std::int64_t ldc,
          const GemmOptions& options, cudaStream_t stream) {
  check_types(options);
  if (m <= 0 || n <= 0) return;
  // cuBLASLt rejects empty layouts; ops::cpu::gemm would only scale C then.
  if (k <= 0) base::fail("kernels::gemm: k must be > 0, got ", k);
  const cudaDataType_t in = cuda_type(options.input), out = cuda_type(options.output);
  const cublasComputeType_t compute =
      options.math == GemmMath::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  MatmulDesc desc(compute);
  const cublasOperation_t op_first = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  if (options.epilogue != GemmEpilogue::kNone) {
    const cublasLtEpilogue_t epilogue = options.epilogue == GemmEpilogue::kBias
                                            ? CUBLASLT_EPILOGUE_BIAS
                                            : CUBLASLT_EPILOGUE_GELU_BIAS;
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, options.bias);
  }
  // Stored shapes (column-major rows × cols) of cuBLASLt's A (our B), B (our A) and C.
  const Layout first(in, b.transposed ? k : n, b.transposed ? n : k, b.ld, options.batch,
                     options.stride_b);
  const Layout second(in, a.transposed ? m : k, a.transposed ? k : m, a.ld, options.batch,
                      options.stride_a);
  const Layout result(out, n, m, ldc, options.batch, options.stride_c);

  Preference preference;
  preference.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, context.workspace_bytes());
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(b.data));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(a.data));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(c));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(c));

  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(context.handle(), desc.desc, first.layout,
                                              second.layout, result.layout, result.layout,
                                              preference.preference, 1, &heuristic, &found),
               "kernels::gemm (heuristic)");
  if (found == 0) {
    base::fail("kernels::gemm: cuBLASLt has no algorithm for m=", m, " n=", n, " k=", k,
               " (lda=", a.ld, " ldb=", b.ld, " ldc=", ldc, ", ", tensor::dtype_name(options.input),
               " -> ", tensor::dtype_name(options.output), ")");
  }
  check_cublas(
      cublasLtMatmul(context.handle(), desc.desc, &alpha, b.data, first.layout, a.data,
                     second.layout, &beta, c, result.layout, c, result.layout, &heuristic.algo,
                     context.workspace(), context.workspace_bytes(), stream),
      "kernels::gemm (matmul)");
}

void linear_forward(GemmContext& context, float* out, const float* x, const float* weight,
                    const float* bias, std::int64_t m, std::int64_t n, std::int64_t k,
                    cudaStream_t stream) {
  GemmOptions options;
  if (bias != nullptr) {
    options.epilogue = GemmEpilogue::kBias;
    options.bias = bias;
  }
  gemm(context, m, n, k, 1.0f, {x, k, false}, {weight, k, true}, 0.0f, out, n, options, stream);
}

void linear_backward(GemmContext& context, float* dx, float* dweight, float* dbias,
                     const float* dout, const float* x, const float* weight, std::int64_t m,
                     std::int64_t n, std::int64_t k, cudaStream_t stream) {
  const GemmOptions fp32;
  if (dx != nullptr && m > 0 && k > 0) {
    gemm(context, m, k, n, 1.0f, {dout, n, false}, {weight, k, false}, 1.0f, dx, k, fp32, stream);
  }
  if (dweight != nullptr && n > 0 && k > 0) {
    gemm(context, n, k, m, 1.0f, {dout, n, true}, {x, k, false}, 1.0f, dweight, k, fp32, stream);
  }
  if (dbias != nullptr && n > 0) {
    bias_grad_kernel<<<detail::column_blocks(n), dim3(detail::kColumnTile, detail::kRowLanes), 0,
                       stream>>>(dbias, dout, m, n);
    check_launch("kernels::linear_backward (dbias)");
  }
}

void batched_matmul(GemmContext& context, float* out, const float* a, const float* b,
                    std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                    bool transpose_a, bool transpose_b, float alpha, float beta,
                    cudaStream_t stream) {
  if (batch <= 0) return;
  GemmOptions options;
  options.batch = batch;
  options.stride_a = m * k;
  options.stride_b = k * n;
  options.stride_c = m * n;
  const std::int64_t lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
  gemm(context, m, n, k, alpha, {a, lda, transpose_a}, {b, ldb, transpose_b}, beta, out, n, options,
       stream);
}

}  // namespace mds::kernels
