// What kernels::GemmContext asks when it may pick among the algorithms cuBLASLt's heuristic offers
// for a GEMM instead of taking its first (pretrain --gemm-tuning-file): the choice made before for
// that GEMM, or where to keep a new one. Plain C++, so that what keeps the choices
// (ops/gemm_tuning_file.h) builds and is tested without CUDA.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mds::ops {

class GemmAlgorithmChoices {
 public:
  virtual ~GemmAlgorithmChoices() = default;
  // The index, in the heuristic's order, chosen for the GEMM that `key` describes, if one was.
  virtual std::optional<int> find(const std::string& key) const = 0;
  // Keeps `index` for `key`, with the times that chose it (ms a call, in the heuristic's order).
  virtual void record(const std::string& key, int index, const std::vector<float>& times_ms) = 0;
};

}  // namespace mds::ops
