#include <cstdint>
#include <string>

#include "base/error.h"
#include "kernels/gemm_plan.cuh"

namespace mds::kernels::detail {

using tensor::DType;

namespace {

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

cublasComputeType_t compute_type(GemmMath math) {
  return math == GemmMath::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

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
    set_attribute(cublasLtMatmulPreferenceSetAttribute, preference, attribute, value,
                  "kernels::gemm (preference attribute)");
  }
};

}  // namespace

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    base::fail("cublasLt: ", what, ": ", cublasLtGetStatusName(status), " (",
               cublasLtGetStatusString(status), ")");
  }
}

MatmulDesc::MatmulDesc(cublasComputeType_t compute) {
  check_cublas(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "kernels::gemm (desc)");
}

MatmulDesc::~MatmulDesc() {
  cublasLtMatmulDescDestroy(desc);
}

Layout::Layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
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

Layout::~Layout() {
  cublasLtMatrixLayoutDestroy(layout);
}

namespace {

cublasLtEpilogue_t epilogue_of(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kBiasGeluAux:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  base::fail("kernels::gemm: unknown epilogue");
}

const char* epilogue_name(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::kNone:
      return "no epilogue";
    case GemmEpilogue::kBias:
      return "epilogue BIAS";
    case GemmEpilogue::kBiasGelu:
      return "epilogue GELU_BIAS";
    case GemmEpilogue::kBiasGeluAux:
      return "epilogue GELU_AUX_BIAS";
  }
  return "unknown epilogue";
}

bool uses_aux(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::kBiasGeluAux;
}

}  // namespace

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix read
// column-major is its transpose. So cuBLASLt multiplies our B (as its "A") by our A (as its "B")
// into an n × m column-major C: an operand stored untransposed is already op(X)ᵀ (CUBLAS_OP_N,
// stored as cols × rows); a transposed one needs CUBLAS_OP_T.
GemmPlan::GemmPlan(cublasLtHandle_t handle, const GemmKey& key)
    : key_(key),
      desc_(compute_type(key.math)),
      first_(cuda_type(key.input), key.b_transposed ? key.k : key.n,
             key.b_transposed ? key.n : key.k, key.ldb, key.batch, key.stride_b),
      second_(cuda_type(key.input), key.a_transposed ? key.m : key.k,
              key.a_transposed ? key.k : key.m, key.lda, key.batch, key.stride_a),
      result_(cuda_type(key.output), key.n, key.m, key.ldc, key.batch, key.stride_c) {
  desc_.set(CUBLASLT_MATMUL_DESC_TRANSA, key.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  desc_.set(CUBLASLT_MATMUL_DESC_TRANSB, key.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  desc_.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue_of(key.epilogue));
  if (uses_aux(key.epilogue)) {
    // The GELU input has C's layout (cuBLASLt's n × m, leading dimension ldc). The heuristic reads
    // the aux pointer's alignment from its value, so any address of the call's alignment stands
    // in for it here; run() sets the call's own.
    desc_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.ldc);
    desc_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
              reinterpret_cast<void*>(static_cast<std::uintptr_t>(key.align_aux)));
  }
  const std::vector<GemmAlgorithm> found = candidates(handle, 1);
  if (found.empty()) {
    base::fail("kernels::gemm: cuBLASLt has no algorithm for m=", key.m, " n=", key.n, " k=", key.k,
               " (lda=", key.lda, " ldb=", key.ldb, " ldc=", key.ldc, ", ",
               tensor::dtype_name(key.input), " -> ", tensor::dtype_name(key.output), ", ",
               epilogue_name(key.epilogue), ")");
  }
  algo_ = found.front().algo;
}

std::vector<GemmAlgorithm> GemmPlan::candidates(cublasLtHandle_t handle, int max) const {
  Preference preference;
  preference.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, key_.workspace_bytes);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key_.align_b);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key_.align_a);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key_.align_c);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key_.align_c);
  if (key_.output != tensor::DType::kFloat32) {
    // A split-K reduced in place or in the output type would round each partial sum to 16 bits;
    // only fp32 partials keep "alpha·AB + beta·C in fp32, rounded once".
    preference.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   std::uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
  }
  cublasLtMatmulHeuristicResult_t results[kMaxCandidates] = {};
  int found = 0;
  check_cublas(
      cublasLtMatmulAlgoGetHeuristic(handle, desc_.desc, first_.layout, second_.layout,
                                     result_.layout, result_.layout, preference.preference,
                                     max < kMaxCandidates ? max : kMaxCandidates, results, &found),
      "kernels::gemm (heuristic)");
  std::vector<GemmAlgorithm> algorithms;
  for (int i = 0; i < found; ++i) algorithms.push_back({results[i].algo});
  return algorithms;
}

void GemmPlan::run(cublasLtHandle_t handle, float alpha, const void* a, const void* b, float beta,
                   void* c, const void* bias, void* aux, void* workspace,
                   std::size_t workspace_bytes, cudaStream_t stream) {
  if (key_.epilogue != GemmEpilogue::kNone) desc_.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (uses_aux(key_.epilogue)) desc_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  check_cublas(
      cublasLtMatmul(handle, desc_.desc, &alpha, b, first_.layout, a, second_.layout, &beta, c,
                     result_.layout, c, result_.layout, &algo_, workspace, workspace_bytes, stream),
      "kernels::gemm (matmul)");
}

std::string describe(const GemmKey& key) {
  std::string text;
  const auto word = [&](const char* name, auto value) {
    if (!text.empty()) text += ' ';
    text += name;
    text += '=';
    text += std::to_string(value);
  };
  word("m", key.m);
  word("n", key.n);
  word("k", key.k);
  word("lda", key.lda);
  word("ldb", key.ldb);
  word("ldc", key.ldc);
  word("at", static_cast<int>(key.a_transposed));
  word("bt", static_cast<int>(key.b_transposed));
  text += " in=";
  text += tensor::dtype_name(key.input);
  text += " out=";
  text += tensor::dtype_name(key.output);
  word("tf32", static_cast<int>(key.math == GemmMath::kTf32));
  word("epilogue", static_cast<int>(key.epilogue));
  word("batch", key.batch);
  word("sa", key.stride_a);
  word("sb", key.stride_b);
  word("sc", key.stride_c);
  word("align", key.align_a);
  word("alignb", key.align_b);
  word("alignc", key.align_c);
  word("alignaux", key.align_aux);
  word("workspace", key.workspace_bytes);
  return text;
}

GemmPlan& GemmPlanCache::find_or_make(cublasLtHandle_t handle, const GemmKey& key) {
  if (const auto found = plans_.find(key); found != plans_.end()) return *found->second;
  if (plans_.size() >= kMaxPlans) plans_.clear();
  auto plan = std::make_unique<GemmPlan>(handle, key);
  return *plans_.emplace(key, std::move(plan)).first->second;
}

}  // namespace mds::kernels::detail
