#include "train/device_choice.h"

#include <charconv>

#include "base/error.h"
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

namespace {

// What keeps an optimizer to one process on a device: the part beyond fp32 at ZeRO stage 0 with
// fp32 gradient communication, the one the device communicators serve on any grid (ZeRO's and
// BF16_Optimizer's partitions and the 16-bit averaging have no device collectives yet).
std::string single_process_part(const OptimizerOptions& optimizer) {
  if (optimizer.precision != Precision::kFp32) {
    return std::string(to_string(optimizer.precision)) + " mixed precision";
  }
  if (optimizer.zero_stage != 0) return "ZeRO stage " + std::to_string(optimizer.zero_stage);
  if (optimizer.communication_dtype != tensor::DType::kFloat32) {
    return "communication_data_type " +
           std::string(tensor::dtype_name(optimizer.communication_dtype));
  }
  return "";
}

}  // namespace

std::string cuda_unsupported_reason(const OptimizerOptions& optimizer, std::int64_t world_size) {
  const std::string part = single_process_part(optimizer);
  if (world_size != 1 && !part.empty()) {
    return part + " trains on a device in one process only so far (" + std::to_string(world_size) +
           " processes)";
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
