// What kernels::gemm keeps between calls: one cuBLASLt plan (descriptors and the algorithm the
// heuristic chose) per distinct GEMM, so that a training step asks the heuristic only on its first
// pass. For gemm.cu only: this header needs cublasLt.h.
#pragma once
#include <cublasLt.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm.h"

namespace mds::kernels::detail {

void check_cublas(cublasStatus_t status, const char* what);

// One cublasLt*SetAttribute call, checked.
template <typename Setter, typename Handle, typename Attribute, typename T>
void set_attribute(Setter setter, Handle handle, Attribute attribute, const T& value,
                   const char* what) {
  check_cublas(setter(handle, attribute, &value, sizeof value), what);
}

// Everything the descriptors and the heuristic's choice depend on. The pointers' alignments are
// part of it (a strided view may be less aligned than the buffer it cuts), the pointers are not.
struct GemmKey {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  bool a_transposed = false, b_transposed = false;
  tensor::DType input = tensor::DType::kFloat32, output = tensor::DType::kFloat32;
  GemmMath math = GemmMath::kFp32;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  std::int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  std::uint32_t align_a = 0, align_b = 0, align_c = 0, align_aux = 0;
  std::size_t workspace_bytes = 0;

  auto operator<=>(const GemmKey&) const = default;
};

// Owners of cuBLASLt descriptors, so that a failure half-way leaks nothing.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  explicit MatmulDesc(cublasComputeType_t compute);
  ~MatmulDesc();
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    set_attribute(cublasLtMatmulDescSetAttribute, desc, attribute, value,
                  "kernels::gemm (desc attribute)");
  }
};

// A column-major rows × cols layout with leading dimension ld, batched when batch > 1.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
         std::int64_t batch, std::int64_t stride);
  ~Layout();
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

// One algorithm the heuristic offers. Named, because nvcc (13.0) fails an internal assertion
// destroying a std::vector of cuBLASLt's unnamed typedef'd structs.
struct GemmAlgorithm {
  cublasLtMatmulAlgo_t algo;
};

// The descriptors of one GEMM and the algorithm the heuristic chose for it.
class GemmPlan {
 public:
  // Fails (base::Error) when cuBLASLt offers no algorithm.
  GemmPlan(cublasLtHandle_t handle, const GemmKey& key);

  // Up to `max` (at most kMaxCandidates) algorithms the heuristic offers for the key's
  // preferences (workspace, alignments, reduction scheme), best first by its estimate: the plan's
  // own is the first. use() makes run() take another.
  static constexpr int kMaxCandidates = 16;
  std::vector<GemmAlgorithm> candidates(cublasLtHandle_t handle, int max) const;
  void use(const GemmAlgorithm& algorithm) { algo_ = algorithm.algo; }
  const GemmKey& key() const { return key_; }
  // Whether GemmContext's algorithm choices have settled this plan's algorithm (gemm.cu).
  bool settled() const { return settled_; }
  void settle() { settled_ = true; }

  // Queues C = epilogue(alpha·op(A)·op(B) + beta·C) on `stream`. `bias` and `aux` (the
  // epilogue's) are set per call: they are the pointers a descriptor holds.
  void run(cublasLtHandle_t handle, float alpha, const void* a, const void* b, float beta, void* c,
           const void* bias, void* aux, void* workspace, std::size_t workspace_bytes,
           cudaStream_t stream);

 private:
  GemmKey key_;
  MatmulDesc desc_;
  Layout first_, second_, result_;  // cuBLASLt's A (our B), B (our A) and C
  cublasLtMatmulAlgo_t algo_{};
  bool settled_ = false;
};

// The key as one line of name=value words, what a GemmAlgorithmChoices file keeps it as.
std::string describe(const GemmKey& key);

// Plans by key. Bounded: past kMaxPlans distinct GEMMs (a shape that changes every call, as a
// growing decode length may) it starts over rather than grow without end.
class GemmPlanCache {
 public:
  static constexpr std::size_t kMaxPlans = 1024;

  GemmPlan& find_or_make(cublasLtHandle_t handle, const GemmKey& key);
  std::size_t size() const { return plans_.size(); }

 private:
  std::map<GemmKey, std::unique_ptr<GemmPlan>> plans_;
};

}  // namespace mds::kernels::detail
