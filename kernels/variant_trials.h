// Trials of launch shapes that compute the same bits (ops/launch_variants.h), run on a problem's
// first call when the caller keeps choices (DeviceContext::time_kernel_shapes).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ops/launch_variants.h"

namespace mds::kernels {

// Device memory a variant writes, compared byte for byte between variants.
struct TrialOutput {
  const void* data;
  std::size_t bytes;
};

// `launch(v)` queues variant v on `stream`; it must leave the same outputs however often it runs
// (nothing accumulated into them). Every variant runs once to warm up (lazy module loading,
// shared-memory opt-ins) and has its `outputs` read back and compared with variant 0's; then
// `rounds` rounds run each variant once in turn, each run timed alone by events, a variant's time
// being its fastest round. Synchronizes the stream.
std::vector<ops::VariantTrial> time_variants(int count, const std::function<void(int)>& launch,
                                             const std::vector<TrialOutput>& outputs,
                                             cudaStream_t stream, int rounds = 3);

// The variant `choices` holds for `key`; else time_variants' pick, recorded there.
int choose_variant(ops::LaunchVariantChoices& choices, const std::string& key,
                   std::vector<std::string> names, const std::function<void(int)>& launch,
                   const std::vector<TrialOutput>& outputs, cudaStream_t stream);

// Device memory for a trial, stream-ordered, handed back when it goes. Null, with no error left
// pending, when the device has not `bytes` to spare: the caller then keeps the default untimed.
class TrialBuffer {
 public:
  TrialBuffer(std::size_t bytes, cudaStream_t stream);
  ~TrialBuffer();
  TrialBuffer(const TrialBuffer&) = delete;
  TrialBuffer& operator=(const TrialBuffer&) = delete;

  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// The reason record_default keeps when a TrialBuffer came back null.
inline constexpr const char* kNoTrialMemory = "no device memory for the trials";

}  // namespace mds::kernels
