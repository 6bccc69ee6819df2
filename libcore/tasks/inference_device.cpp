#include "tasks/inference_device.h"

#include <cstdlib>

#include "ops/attention.h"
#include "tensor/device_memory.h"
#include "train/device_choice.h"

namespace mds::tasks {

std::string inference_cuda_unsupported_reason(std::int64_t head_dim) {
  // WikiText runs the training forward (flash attention), LAMBADA and generate the decode
  // attention: a device run needs both kernels.
  if (!ops::flash_attention_supports(head_dim) || !ops::decode_attention_supports_cuda(head_dim)) {
    return "head dim " + std::to_string(head_dim) +
           " has no CUDA attention kernel (8, 16, 32, 64, 96 or 128)";
  }
  return "";
}

tensor::Device choose_inference_device(const config::PretrainArgs& args, int local_rank,
                                       const base::Log& log) {
  std::string requested = args.device;
  if (!args.was_given("--device")) {
    if (const char* env = std::getenv("MDS_DEVICE"); env != nullptr && *env != '\0') {
      requested = env;
    }
  }
  const std::string reason =
      inference_cuda_unsupported_reason(args.hidden_size / args.num_attention_heads);
  const int devices = tensor::cuda_device_count();
  const train::DeviceChoice choice = train::choose_device(
      train::parse_device_flag_for_rank(requested, local_rank, devices), devices, reason);
  if (!choice.note.empty()) {
    log.note("running on the CPU although a CUDA device is present: " + reason);
  }
  if (choice.device.kind == tensor::DeviceKind::kCuda) {
    log.info(" > running on " + tensor::device_name(choice.device) + " (" +
             tensor::cuda_device_description(choice.device.index) + ")");
  }
  return choice.device;
}

void place_on_device(InferenceModel& model, tensor::Device device, ops::Fp32Matmul fp32_matmul) {
  if (device.kind != tensor::DeviceKind::kCuda) return;
  model.device = std::make_unique<ops::DeviceContext>(device, fp32_matmul);
  auto params = std::make_unique<model::ParamBuffer>(*model.table, tensor::DType::kFloat32, device);
  tensor::copy(params->flat(), model.params->flat());
  model.params = std::move(params);
}

}  // namespace mds::tasks
