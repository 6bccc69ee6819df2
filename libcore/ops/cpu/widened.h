// fp32 views of activation tensors for the host path of the ops with 16-bit variants: a bf16 or
// fp16 tensor is widened exactly into a host copy, the fp32 CPU function runs on the copies, and
// each output is rounded once back into its tensor (ops::cpu::cast: round to nearest even). An
// fp32 tensor is used in place, so the fp32 path is the CPU function itself, unchanged.
#pragma once
#include <vector>

#include "ops/cpu/elementwise.h"
#include "tensor/tensor.h"

namespace mds::ops::cpu {

class Fp32View {
 public:
  // `read`: widen the tensor's values (inputs, and outputs the function adds into); an output it
  // only writes skips the copy-in. An undefined tensor (an optional argument) gives null.
  explicit Fp32View(tensor::Tensor tensor, bool read = true) : tensor_(tensor) {
    if (tensor.dtype() == tensor::DType::kFloat32 || tensor.raw() == nullptr) {
      data_ = static_cast<float*>(tensor.raw());
      return;
    }
    copy_.resize(static_cast<std::size_t>(tensor.numel()));
    if (read) cast(copy_.data(), tensor::DType::kFloat32, tensor.raw(), tensor.dtype(), numel());
    data_ = copy_.data();
  }

  float* data() const { return data_; }

  // Rounds the fp32 results into the tensor (nothing to do for an fp32 one).
  void store() const {
    if (!copy_.empty())
      cast(tensor_.raw(), tensor_.dtype(), copy_.data(), tensor::DType::kFloat32, numel());
  }

 private:
  std::int64_t numel() const { return tensor_.numel(); }

  tensor::Tensor tensor_;
  std::vector<float> copy_;
  float* data_ = nullptr;
};

}  // namespace mds::ops::cpu
