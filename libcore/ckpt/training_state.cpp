#include "ckpt/training_state.h"

#include "base/error.h"

namespace mds::ckpt {

std::string_view layout_name(OptimizerLayout layout) {
  switch (layout) {
    case OptimizerLayout::kFp32:
      return "fp32";
    case OptimizerLayout::kFp16:
      return "fp16";
    case OptimizerLayout::kFp16Zero1:
      return "fp16-zero1";
    case OptimizerLayout::kBf16:
      return "bf16";
    case OptimizerLayout::kFp32Zero:
      return "fp32-zero";
  }
  return "?";
}

tensor::DType params_dtype(OptimizerLayout layout) {
  switch (layout) {
    case OptimizerLayout::kFp16:
    case OptimizerLayout::kFp16Zero1:
      return tensor::DType::kFloat16;
    case OptimizerLayout::kBf16:
      return tensor::DType::kBFloat16;
    case OptimizerLayout::kFp32:
    case OptimizerLayout::kFp32Zero:
      break;
  }
  return tensor::DType::kFloat32;
}

bool has_zero_file(OptimizerLayout layout) {
  return is_zero_optimizer(layout) || layout == OptimizerLayout::kBf16;
}

bool is_zero_optimizer(OptimizerLayout layout) {
  return layout == OptimizerLayout::kFp16Zero1 || layout == OptimizerLayout::kFp32Zero;
}

namespace {

void check_buffer(const tensor::Tensor& t, std::string_view name, tensor::DType dtype,
                  std::int64_t numel, std::string_view who) {
  if (!t.defined() || t.raw() == nullptr) base::fail(who, ": the ", name, " buffer is not set");
  if (t.device().kind != tensor::DeviceKind::kCpu) {
    base::fail(who, ": the ", name, " buffer must be in host memory");
  }
  if (t.dtype() != dtype) {
    base::fail(who, ": the ", name, " buffer holds ", tensor::dtype_name(t.dtype()), ", expected ",
               tensor::dtype_name(dtype));
  }
  if (t.numel() != numel) {
    base::fail(who, ": the ", name, " buffer has ", t.numel(), " elements, expected ", numel);
  }
}

}  // namespace

void check_state_buffers(const TrainingState& state, bool need_master, bool need_moments,
                         std::string_view who) {
  if (state.table == nullptr) base::fail(who, ": no parameter table");
  const std::int64_t n = state.table->buffer_numel();
  check_buffer(state.params, "params", params_dtype(state.layout), n, who);
  std::int64_t optimizer_numel = n;
  if (has_zero_file(state.layout) && (need_master || need_moments)) {
    if (state.zero == nullptr || &state.zero->table() != state.table) {
      base::fail(who, ": the ", layout_name(state.layout),
                 " layout needs the ZeRO partition layout of its parameter table");
    }
    if (state.zero->dp_size() != state.ranks.dp_size) {
      base::fail(who, ": the ZeRO layout has ", state.zero->dp_size(), " partitions but the run ",
                 state.ranks.dp_size, " data-parallel ranks");
    }
    optimizer_numel = state.zero->partition_numel();
  }
  if (need_master && state.layout != OptimizerLayout::kFp32) {
    check_buffer(state.master, "fp32 master", tensor::DType::kFloat32, optimizer_numel, who);
  }
  if (need_moments) {
    check_buffer(state.exp_avg, "exp_avg", tensor::DType::kFloat32, optimizer_numel, who);
    check_buffer(state.exp_avg_sq, "exp_avg_sq", tensor::DType::kFloat32, optimizer_numel, who);
  }
}

}  // namespace mds::ckpt
