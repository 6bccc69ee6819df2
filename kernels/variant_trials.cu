#include "kernels/variant_trials.h"

#include <cstring>
#include <utility>

#include "kernels/check.h"
#include "kernels/timing_events.h"

namespace mds::kernels {
namespace {

constexpr const char* kWhat = "kernels::time_variants";

// The outputs' bytes, after the work queued so far.
std::vector<std::vector<char>> read_back(const std::vector<TrialOutput>& outputs,
                                         cudaStream_t stream) {
  std::vector<std::vector<char>> host;
  for (const TrialOutput& out : outputs) {
    host.emplace_back(out.bytes);
    check_cuda(
        cudaMemcpyAsync(host.back().data(), out.data, out.bytes, cudaMemcpyDeviceToHost, stream),
        "kernels::time_variants (read back)");
  }
  check_cuda(cudaStreamSynchronize(stream), "kernels::time_variants (read back)");
  return host;
}

}  // namespace

std::vector<ops::VariantTrial> time_variants(int count, const std::function<void(int)>& launch,
                                             const std::vector<TrialOutput>& outputs,
                                             cudaStream_t stream, int rounds) {
  std::vector<ops::VariantTrial> trials(static_cast<std::size_t>(count));
  std::vector<std::vector<char>> reference;
  for (int v = 0; v < count; ++v) {
    launch(v);
    std::vector<std::vector<char>> bytes = read_back(outputs, stream);
    if (v == 0) {
      reference = std::move(bytes);
    } else {
      trials[static_cast<std::size_t>(v)].same_bits = bytes == reference;
    }
  }
  TimingEvents events(kWhat);
  for (int round = 0; round < rounds; ++round) {
    for (int v = 0; v < count; ++v) {
      const float ms = events.time([&] { launch(v); }, stream);
      ops::VariantTrial& t = trials[static_cast<std::size_t>(v)];
      if (round == 0 || ms < t.ms) t.ms = ms;
    }
  }
  return trials;
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
