// Which device a training run uses (`pretrain --device`, docs/pretrain.md "Device"). Upstream
// trains on the GPU; mds does too where it can: `auto` picks CUDA when the build has it, a device
// is there and the run is one the CUDA path implements, and the host otherwise (saying why when a
// device was there). `cpu` and `cuda[:N]` force a choice; forcing CUDA for a run it cannot do yet
// is an error naming what is missing.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mds::train {

enum class DeviceRequest { kAuto, kCpu, kCuda };

struct DeviceFlag {
  DeviceRequest request = DeviceRequest::kAuto;
  int index = 0;  // cuda:N
};

// "auto", "cpu", "cuda" or "cuda:N"; anything else fails with one line naming the choices.
DeviceFlag parse_device_flag(std::string_view text);

// parse_device_flag as rank `local_rank` of a node applies it with `cuda_devices` visible: `cuda`
// and `auto` take device local_rank mod cuda_devices (upstream's
// torch.cuda.set_device(local_rank % device_count)), `cuda:N` is N on every rank.
DeviceFlag parse_device_flag_for_rank(std::string_view text, int local_rank, int cuda_devices);

// Why a run cannot train on CUDA devices, or "" when it can: a head dim (hidden size / attention
// heads) without a flash-attention kernel. Every optimizer (fp32, bf16, fp16; ZeRO stages 0, 1,
// 2; any communication dtype) trains on devices on any T × P × D grid, one device per rank, over
// the device communicators of dist/.
std::string cuda_unsupported_reason(std::int64_t head_dim);

struct DeviceChoice {
  tensor::Device device;
  // Set when `auto` stayed on the host although a CUDA device was there: why.
  std::string note;
};

// The device for `flag` given the CUDA devices this process sees and the run's
// cuda_unsupported_reason. Fails with one line for `cuda` without a device (or without that
// index) or for a run the CUDA path cannot do.
DeviceChoice choose_device(const DeviceFlag& flag, int cuda_devices,
                           const std::string& unsupported_reason);

}  // namespace mds::train
