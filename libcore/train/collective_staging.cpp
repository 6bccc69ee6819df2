#include "train/collective_staging.h"

#include <algorithm>

#include "base/error.h"

namespace mds::train {

CollectiveStaging::CollectiveStaging(std::int64_t chunk_numel, tensor::Device device)
    : chunk_numel_(chunk_numel), device_(device) {
  if (chunk_numel < 2) {
    base::fail("CollectiveStaging: a chunk must hold at least 2 elements, got ", chunk_numel);
  }
}

std::int64_t CollectiveStaging::per_rank_chunk(std::int64_t ranks) const {
  if (ranks < 1) base::fail("CollectiveStaging: ranks must be at least 1, got ", ranks);
  const std::int64_t per_rank = chunk_numel_ / ranks;
  return std::max<std::int64_t>(2, per_rank - per_rank % 2);
}

std::int64_t CollectiveStaging::all_reduce_chunk(std::int64_t ranks) const {
  if (ranks < 1) base::fail("CollectiveStaging: ranks must be at least 1, got ", ranks);
  const std::int64_t unit = 2 * ranks;
  return std::max<std::int64_t>(unit, chunk_numel_ - chunk_numel_ % unit);
}

tensor::Tensor CollectiveStaging::get(Slot slot, tensor::DType dtype, std::int64_t numel) {
  tensor::Buffer& buffer = slots_[static_cast<int>(slot)];
  const std::size_t bytes = static_cast<std::size_t>(numel) * tensor::dtype_size(dtype);
  if (buffer.bytes() < bytes) {
    buffer = tensor::Buffer();  // release first: the old and the new never coexist
    buffer = tensor::Buffer(bytes, device_);
  }
  return buffer.as(dtype, tensor::Shape{numel});
}

std::size_t CollectiveStaging::bytes() const {
  std::size_t total = 0;
  for (const tensor::Buffer& buffer : slots_) total += buffer.bytes();
  return total;
}

}  // namespace mds::train
