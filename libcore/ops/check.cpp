#include "ops/check.h"

#include "base/error.h"

namespace mds::ops::detail {

tensor::DeviceKind common_device(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& arg : args) {
    if (!given(arg.tensor)) continue;
    if (first == nullptr) {
      first = &arg;
    } else if (!(arg.tensor.device() == first->tensor.device())) {
      base::fail("ops::", op, ": ", arg.name, " and ", first->name, " are on different devices (",
                 tensor::device_name(arg.tensor.device()), " and ",
                 tensor::device_name(first->tensor.device()), ")");
    }
  }
  return first == nullptr ? tensor::DeviceKind::kCpu : first->tensor.device().kind;
}

bool on_cuda(const char* op, const DeviceContext& ctx, std::initializer_list<Arg> args) {
  common_device(op, args);
  for (const Arg& arg : args) {
    if (!given(arg.tensor)) continue;
    if (!(arg.tensor.device() == ctx.device())) {
      base::fail("ops::", op, ": the tensors are on ", tensor::device_name(arg.tensor.device()),
                 " but the DeviceContext runs on ", tensor::device_name(ctx.device()),
                 " (pass the context of their device)");
    }
    break;  // all the others are on the same device
  }
  return ctx.is_cuda();
}

void require_cpu(const char* op, std::initializer_list<Arg> args) {
  if (common_device(op, args) != tensor::DeviceKind::kCpu) {
    base::fail("ops::", op, " runs on host tensors only (it has no CUDA backend)");
  }
}

void expect_dtype(const char* op, Arg arg, tensor::DType dtype) {
  if (arg.tensor.dtype() != dtype) {
    base::fail("ops::", op, ": ", arg.name, " must be ", tensor::dtype_name(dtype), ", got ",
               tensor::dtype_name(arg.tensor.dtype()));
  }
}

void expect_shape(const char* op, Arg arg, const tensor::Shape& shape) {
  if (!(arg.tensor.shape() == shape)) {
    base::fail("ops::", op, ": ", arg.name, " must have shape ", shape.to_string(), ", got ",
               arg.tensor.shape().to_string());
  }
}

void expect_numel(const char* op, Arg arg, std::int64_t numel) {
  if (arg.tensor.numel() != numel) {
    base::fail("ops::", op, ": ", arg.name, " must have ", numel, " elements, got ",
               arg.tensor.numel(), " (shape ", arg.tensor.shape().to_string(), ")");
  }
}

std::int64_t rows_with_last_dim(const char* op, Arg arg, std::int64_t cols) {
  const tensor::Shape& shape = arg.tensor.shape();
  if (shape.rank() == 0 || shape[shape.rank() - 1] != cols) {
    base::fail("ops::", op, ": ", arg.name, " must have last dimension ", cols, ", got shape ",
               shape.to_string());
  }
  return cols == 0 ? 0 : arg.tensor.numel() / cols;
}

}  // namespace mds::ops::detail
