// Helpers of the GPU tests that go through libcore (ops::, model::, train::) rather than calling
// kernels/ directly: a host vector with a device copy of it, viewed as tensors of one shape.
#pragma once

#include <utility>
#include <vector>

#include "ops/device_context.h"
#include "tensor/buffer.h"
#include "tensor/device_memory.h"
#include "tensor/tensor.h"

namespace mds::gpu_test {

// Values on the host (`host`, viewed by h) and the same values on the context's device (d). The
// device copy is made once; download() reads it back.
template <typename T>
struct Mirrored {
  Mirrored(const ops::DeviceContext& ctx, std::vector<T> values, tensor::Shape shape)
      : host(std::move(values)),
        buffer(host.size() * sizeof(T), ctx.device()),
        h(host.data(), tensor::dtype_of<T>(), shape),
        d(buffer.as(tensor::dtype_of<T>(), shape)) {
    tensor::copy(d, h);
  }
  Mirrored(const Mirrored&) = delete;
  Mirrored& operator=(const Mirrored&) = delete;

  // The device values now (after the context's queued work, whose errors surface here).
  std::vector<T> download(const ops::DeviceContext& ctx) const {
    ctx.synchronize();
    std::vector<T> out(host.size());
    tensor::copy(tensor::Tensor(out.data(), tensor::dtype_of<T>(), d.shape()), d);
    return out;
  }

  std::vector<T> host;
  tensor::Buffer buffer;
  tensor::Tensor h, d;
};

}  // namespace mds::gpu_test
