#include "tensor/arena.h"

#include "base/error.h"

namespace mds::tensor {
namespace {

constexpr std::size_t kSlotAlignment = 64;  // a cache line, and enough for vector loads

}  // namespace

std::size_t ArenaPlan::add(std::string name, DType dtype, Shape shape) {
  const std::size_t offset = (total_ + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  slots_.push_back({std::move(name), dtype, shape, offset});
  total_ = offset + bytes;
  return slots_.size() - 1;
}

Arena::Arena(const ArenaPlan& plan, Device device, const std::string& what) : slots_(plan.slots()) {
  try {
    buffer_ = Buffer(plan.total_bytes(), device);
  } catch (const base::Error& e) {
    base::fail(what, ": cannot allocate ", plan.total_bytes(), " bytes for ", plan.slots().size(),
               " tensors (", e.what(), ")");
  }
}

Tensor Arena::operator[](std::size_t slot) const {
  const ArenaPlan::Slot& s = slots_.at(slot);
  return {static_cast<char*>(buffer_.data()) + s.offset, s.dtype, s.shape, buffer_.device()};
}

}  // namespace mds::tensor
