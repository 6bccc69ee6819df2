// Where `evaluate` and `generate` run: `--device auto|cpu|cuda[:N]` (or $MDS_DEVICE when the flag
// is absent) with pretrain's meaning (train/device_choice.h): each rank of a node takes device
// local_rank mod <visible devices> (`cuda:N`: N on every rank). `auto` takes that device when the
// build has CUDA, a device is visible and the model's head dim has CUDA attention kernels;
// otherwise the host, with a note when a device was there. Forcing CUDA for a run it cannot do
// fails with one line naming what is missing. Several ranks on devices exchange device tensors
// over the communicators --distributed-backend picks (tasks/inference_comms.h).
#pragma once
#include <cstdint>
#include <string>

#include "base/log.h"
#include "config/pretrain_args.h"
#include "ops/device_context.h"
#include "tasks/inference_model.h"
#include "tensor/tensor.h"

namespace mds::tasks {

// Why this model cannot run on a CUDA device, or "": a head dim without CUDA attention kernels.
std::string inference_cuda_unsupported_reason(std::int64_t head_dim);

// The device of the rank with launcher local rank `local_rank` for validated args
// (tasks::validate_inference_args); logs the choice (a CUDA device by name, or the note of `auto`
// staying on the host).
tensor::Device choose_inference_device(const config::PretrainArgs& args, int local_rank,
                                       const base::Log& log);

// Moves the loaded weights to `device` and gives the model a DeviceContext there (model.device),
// whose fp32 GEMMs multiply as `fp32_matmul` says (--tf32); nothing happens for the host.
void place_on_device(InferenceModel& model, tensor::Device device,
                     ops::Fp32Matmul fp32_matmul = ops::Fp32Matmul::kFp32);

}  // namespace mds::tasks
