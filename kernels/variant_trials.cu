#include "kernels/variant_trials.h"

#include <string>
#include <utility>
#include <vector>

#include "kernels/check.h"
#include "kernels/timing_events.h"

namespace mds::kernels {

std::vector<ops::VariantTrial> time_variants(int count, const std::function<void(int)>& launch,
                                             const std::vector<TrialOutput>& outputs,
                                             cudaStream_t stream, int rounds) {
  // The outputs' bytes after the work queued so far.
  const auto read_back = [&] {
    std::vector<std::string> host;
    host.reserve(outputs.size());  // no string moves while copies into them are in flight
    for (const TrialOutput& out : outputs) {
      host.emplace_back(out.bytes, '\0');
      check_cuda(
          cudaMemcpyAsync(host.back().data(), out.data, out.bytes, cudaMemcpyDeviceToHost, stream),
          "kernels::time_variants (read back)");
    }
    check_cuda(cudaStreamSynchronize(stream), "kernels::time_variants (read back)");
    return host;
  };
  TimingEvents events("kernels::time_variants");
  return ops::run_trials(count, rounds, launch, read_back,
                         [&](int v) { return events.time([&] { launch(v); }, stream); });
}

int choose_variant(ops::LaunchVariantChoices& choices, const std::string& key,
                   std::vector<std::string> names, const std::function<void(int)>& launch,
                   const std::vector<TrialOutput>& outputs, cudaStream_t stream) {
  if (const std::optional<int> known = choices.find(key)) return *known;
  std::vector<ops::VariantTrial> trials =
      time_variants(static_cast<int>(names.size()), launch, outputs, stream);
  return choices.record(key, std::move(names), std::move(trials));
}

TrialBuffer::TrialBuffer(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (cudaMallocAsync(&data_, bytes, stream) != cudaSuccess) {
    data_ = nullptr;
    (void)cudaGetLastError();  // out of memory is not sticky: clear it so later checks pass
  }
}

TrialBuffer::~TrialBuffer() {
  if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
}

}  // namespace mds::kernels
