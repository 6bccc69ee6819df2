// Where `evaluate` and `generate` run: `--device auto|cpu|cuda[:N]` (or $MDS_DEVICE when the flag
// is absent) with pretrain's meaning (train/device_choice.h). `auto` takes cuda:0 when the build
// has CUDA, a device is visible and the run is one the device path does (one process, a head dim
// with CUDA attention kernels); otherwise the host, with a note when a device was there. Forcing
// CUDA for a run it cannot do fails with one line naming what is missing.
#pragma once
#include <cstdint>
#include <string>

#include "base/log.h"
#include "config/pretrain_args.h"
#include "tasks/inference_model.h"
#include "tensor/tensor.h"

namespace mds::tasks {

// Why this run cannot use a CUDA device, or "": several processes (T × P grids and replicas need
// device communicators, which do not exist yet), or a head dim without CUDA attention kernels.
std::string inference_cuda_unsupported_reason(std::int64_t world_size, std::int64_t head_dim);

// The device for validated args (tasks::validate_inference_args) and the launcher's world size;
// logs the choice (a CUDA device by name, or the note of `auto` staying on the host).
tensor::Device choose_inference_device(const config::PretrainArgs& args, std::int64_t world_size,
                                       const base::Log& log);

// Moves the loaded weights to `device` and gives the model a DeviceContext there (model.device);
// nothing happens for the host.
void place_on_device(InferenceModel& model, tensor::Device device);

}  // namespace mds::tasks
