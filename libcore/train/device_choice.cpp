#include "train/device_choice.h"

#include <charconv>

#include "base/error.h"
#include "ops/attention.h"
#include "tensor/device_memory.h"

namespace mds::train {

DeviceFlag parse_device_flag(std::string_view text) {
  if (text == "auto") return {DeviceRequest::kAuto, 0};
  if (text == "cpu") return {DeviceRequest::kCpu, 0};
  if (text == "cuda") return {DeviceRequest::kCuda, 0};
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    const std::string_view digits = text.substr(kPrefix.size());
    int index = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (error == std::errc{} && end == digits.data() + digits.size() && !digits.empty() &&
        index >= 0) {
      return {DeviceRequest::kCuda, index};
    }
  }
  base::fail("--device must be auto, cpu, cuda or cuda:N, got '", text, "'");
}

DeviceFlag parse_device_flag_for_rank(std::string_view text, int local_rank, int cuda_devices) {
  DeviceFlag flag = parse_device_flag(text);
  const bool index_given = text.find(':') != std::string_view::npos;
  if (flag.request != DeviceRequest::kCpu && !index_given && cuda_devices > 0) {
    flag.index = local_rank % cuda_devices;
  }
  return flag;
}

std::string cuda_unsupported_reason(std::int64_t head_dim) {
  if (!ops::flash_attention_supports(head_dim)) {
    return "head dim " + std::to_string(head_dim) +
           " has no CUDA flash-attention kernel (8, 16, 32, 64, 96 or 128)";
  }
  return "";
}

DeviceChoice choose_device(const DeviceFlag& flag, int cuda_devices,
                           const std::string& unsupported_reason) {
  const tensor::Device cuda{tensor::DeviceKind::kCuda, flag.index};
  switch (flag.request) {
    case DeviceRequest::kCpu:
      return {};
    case DeviceRequest::kCuda:
      if (flag.index >= cuda_devices) {
        base::fail("--device ", tensor::device_name(cuda), ": ",
                   !tensor::kCudaBuilt ? "this build has no CUDA backend (BUILD_CUDA=OFF)"
                   : cuda_devices == 0
                       ? "no CUDA device is visible to this process"
                       : "this process sees " + std::to_string(cuda_devices) + " CUDA device(s)");
      }
      if (!unsupported_reason.empty()) {
        base::fail("--device ", tensor::device_name(cuda), ": ", unsupported_reason,
                   " (use --device cpu)");
      }
      return {cuda, ""};
    case DeviceRequest::kAuto:
      break;
  }
  if (cuda_devices == 0) return {};
  if (!unsupported_reason.empty()) {
    return {{}, "training on the CPU although a CUDA device is present: " + unsupported_reason};
  }
  return {cuda, ""};
}

}  // namespace mds::train
