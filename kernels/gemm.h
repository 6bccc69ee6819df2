// GEMMs through cuBLASLt: the CUDA twin of ops/cpu/gemm.h (row-major operands, transposes,
// alpha/beta) and of ops/cpu/matmul.h (linear layers, batched products). Device pointers, work
// queued on `stream`.
//
// Precision: fp32 inputs compute in fp32 (CUBLAS_COMPUTE_32F, no TF32) unless GemmMath::kTf32 is
// asked for; bf16 or fp16 inputs always accumulate in fp32 and write their own type or fp32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/column_sum_scratch.h"
#include "ops/gemm_choices.h"
#include "tensor/dtype.h"

struct cublasLtContext;  // cublasLt.h's handle type, kept out of this header

namespace mds::kernels {

namespace detail {
class GemmPlanCache;
}

enum class GemmMath {
  kFp32,  // fp32 inputs multiply in full fp32
  kTf32,  // fp32 inputs may be rounded to TF32 (10-bit mantissa) on tensor cores; fp32 only
};

// A cuBLASLt handle, the device workspace its algorithms may use, and the plans of the GEMMs run
// so far (descriptors and the heuristic's algorithm per shape, dtypes, transposes and operand
// alignment), so each distinct GEMM asks the heuristic once. One context serves one stream and one
// host thread at a time (the workspace and the plans are shared by its calls); make one per
// concurrent stream.
class GemmContext {
 public:
  // Hopper kernels use up to 32 MiB; less only narrows the algorithms on offer.
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  explicit GemmContext(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  cublasLtContext* handle() const { return handle_; }
  void* workspace() const { return workspace_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // The math of linear_forward/backward and batched_matmul on fp32 operands (kFp32 unless set);
  // kernels::gemm takes its own from GemmOptions.
  GemmMath fp32_math() const { return fp32_math_; }
  void set_fp32_math(GemmMath math) { fp32_math_ = math; }
  // How many distinct GEMMs have a plan.
  std::size_t cached_plans() const;
  detail::GemmPlanCache& plans() { return *plans_; }
  // With choices set (not owned; null: none, the default), the first call of each distinct GEMM
  // takes the algorithm `choices` holds for it, or else times every algorithm the heuristic
  // offers on that call's operands (C kept as it was), takes the fastest and records it there.
  // Without, every GEMM runs the heuristic's first choice.
  void set_algorithm_choices(ops::GemmAlgorithmChoices* choices) { choices_ = choices; }
  ops::GemmAlgorithmChoices* algorithm_choices() const { return choices_; }

 private:
  std::unique_ptr<detail::GemmPlanCache> plans_;
  cublasLtContext* handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  GemmMath fp32_math_ = GemmMath::kFp32;
  ops::GemmAlgorithmChoices* choices_ = nullptr;
};

// The current device's name and the cuBLASLt version, which decide what a recorded algorithm
// index means (ops/gemm_tuning_file.h).
std::string gemm_platform();

// A row-major matrix as stored: element (r, c) at data[r·ld + c]; op(X) = Xᵀ when transposed.
struct GemmOperand {
  const void* data;
  std::int64_t ld;
  bool transposed;
};

enum class GemmEpilogue {
  kNone,
  kBias,         // + bias[n] on every row of C (after alpha·AB + beta·C)
  kBiasGelu,     // gelu(… + bias) with cuBLASLt's tanh approximation; its input is not kept, so
                 // this is for inference (or a recomputing backward), not for ops::GeluKind parity
  kBiasGeluAux,  // kBiasGelu, and its input (… + bias) written into GemmOptions::aux (C's dtype,
                 // shape and ldc, which must be a multiple of 8; no batch): what a backward needs
};

struct GemmOptions {
  tensor::DType input = tensor::DType::kFloat32;   // A and B: float32, bfloat16 or float16
  tensor::DType output = tensor::DType::kFloat32;  // C: float32, or the input's 16-bit type
  GemmMath math = GemmMath::kFp32;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  const void* bias = nullptr;  // [n] of the output dtype, for the bias epilogues
  void* aux = nullptr;         // kBiasGeluAux's GeLU input [m, ldc], written
  // Strided batch: `batch` products, operand i at data + i·stride (elements).
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Row-major C[m, n] = epilogue(alpha · op(A)[m, k] · op(B)[k, n] + beta · C), as
// ops::cpu::gemm. Fails (base::Error) on an unsupported dtype combination or when cuBLASLt
// offers no algorithm for the shape.
void gemm(GemmContext& context, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          GemmOperand a, GemmOperand b, float beta, void* c, std::int64_t ldc,
          const GemmOptions& options, cudaStream_t stream);

// For benchmarks: the GEMM above run with each of up to `max_algorithms`
// algorithms cuBLASLt's heuristic offers for it, in its order (the first is the one gemm() runs),
// milliseconds per call as the mean of `iters` calls after one warm-up. C is overwritten (with
// beta ≠ 0, accumulated onto) many times.
std::vector<float> time_gemm_algorithms(GemmContext& context, std::int64_t m, std::int64_t n,
                                        std::int64_t k, float alpha, GemmOperand a, GemmOperand b,
                                        float beta, void* c, std::int64_t ldc,
                                        const GemmOptions& options, int max_algorithms, int iters,
                                        cudaStream_t stream);

// Twins of ops/cpu/matmul.h on activations and weights of one `dtype`: fp32 (the context's
// fp32_math: full fp32 unless set to TF32), or bf16/fp16 (fp32 accumulation, each 16-bit output
// rounded once; the bias has the same dtype; dweight and dbias stay fp32).
// out[m, n] = x[m, k] · weight[n, k]ᵀ (+ bias[n] when not null).
void linear_forward(GemmContext& context, void* out, const void* x, const void* weight,
                    const void* bias, tensor::DType dtype, std::int64_t m, std::int64_t n,
                    std::int64_t k, cudaStream_t stream);
// dx += dout · weight (dx = … without accumulate_dx: beta = 0, dx not read); dweight += doutᵀ · x;
// dbias += Σ_rows dout (a fixed-order column sum, deterministic). Null gradient pointers are
// skipped. A 16-bit dx is accumulated with beta = 1 on
// a 16-bit C (gemm.cu: some cuBLASLt algorithms round the product to 16 bits before adding).
void linear_backward(GemmContext& context, void* dx, float* dweight, float* dbias, const void* dout,
                     const void* x, const void* weight, tensor::DType dtype, std::int64_t m,
                     std::int64_t n, std::int64_t k, ColumnSumScratch& scratch, cudaStream_t stream,
                     bool accumulate_dx = true, bool accumulate_dweight = true);
// out[i] = alpha · op(a[i]) · op(b[i]) + beta · out[i] for i < batch, packed [batch, ·, ·].
void batched_matmul(GemmContext& context, void* out, const void* a, const void* b,
                    tensor::DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n,
                    std::int64_t k, bool transpose_a, bool transpose_b, float alpha, float beta,
                    cudaStream_t stream);

// The fp32 forms.
inline void linear_forward(GemmContext& context, float* out, const float* x, const float* weight,
                           const float* bias, std::int64_t m, std::int64_t n, std::int64_t k,
                           cudaStream_t stream) {
  linear_forward(context, out, x, weight, bias, tensor::DType::kFloat32, m, n, k, stream);
}
inline void linear_backward(GemmContext& context, float* dx, float* dweight, float* dbias,
                            const float* dout, const float* x, const float* weight, std::int64_t m,
                            std::int64_t n, std::int64_t k, ColumnSumScratch& scratch,
                            cudaStream_t stream, bool accumulate_dx = true) {
  linear_backward(context, dx, dweight, dbias, dout, x, weight, tensor::DType::kFloat32, m, n, k,
                  scratch, stream, accumulate_dx);
}
inline void batched_matmul(GemmContext& context, float* out, const float* a, const float* b,
                           std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                           bool transpose_a, bool transpose_b, float alpha, float beta,
                           cudaStream_t stream) {
  batched_matmul(context, out, a, b, tensor::DType::kFloat32, batch, m, n, k, transpose_a,
                 transpose_b, alpha, beta, stream);
}

}  // namespace mds::kernels
