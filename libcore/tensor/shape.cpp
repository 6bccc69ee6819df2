#include "tensor/shape.h"

#include "base/error.h"

namespace mds::tensor {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  if (dims.size() > kMaxRank) base::fail("tensor rank ", dims.size(), " exceeds ", kMaxRank);
  for (const std::int64_t d : dims) {
    if (d < 0) base::fail("negative tensor dimension ", d);
    dims_[rank_++] = d;
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (std::size_t i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::string Shape::to_string() const {
  std::string text = "[";
  for (std::size_t i = 0; i < rank_; ++i) text += (i ? ", " : "") + std::to_string(dims_[i]);
  return text + "]";
}

}  // namespace mds::tensor
