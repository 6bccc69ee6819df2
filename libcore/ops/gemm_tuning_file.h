// GEMM algorithm choices kept in a text file (pretrain --gemm-tuning-file): read when the run
// starts, rewritten whole (AtomicFile) after each new choice, so that a later run with the same
// file on the same platform makes the same choices and repeats its bits. The file names the
// platform that chose (the device and the cuBLASLt version, kernels::gemm_platform()); another
// platform's file is refused, since its indices would name other algorithms. Format:
//
//   # comment lines
//   platform = NVIDIA H100 80GB HBM3, cuBLASLt 130000
//   3 | m=8192 n=2304 k=768 … | 0.0412 0.0398 …      (index | GEMM | ms a call per candidate)
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/gemm_choices.h"

namespace mds::ops {

class GemmTuningFile : public GemmAlgorithmChoices {
 public:
  // Reads `path` if it exists (failing with one line naming the file and line of anything
  // malformed, or the platform when it is not `platform`); otherwise starts empty. Fails at once,
  // before any GEMM is timed, where the path is not a readable file or its folder is missing.
  GemmTuningFile(std::string path, std::string platform);

  std::optional<int> find(const std::string& key) const override;
  // Keeps the choice and rewrites the file.
  void record(const std::string& key, int index, const std::vector<float>& times_ms) override;

  std::size_t size() const { return choices_.size(); }
  const std::string& path() const { return path_; }

 private:
  struct Choice {
    int index = 0;
    std::string times;  // as written: the ms of each candidate
  };
  void load();
  void save() const;

  std::string path_;
  std::string platform_;
  std::map<std::string, Choice> choices_;
};

}  // namespace mds::ops
