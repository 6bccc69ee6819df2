#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace mds::tensor {

// Dimensions of a tensor, outermost first. Fixed capacity: the model never needs more than 4
// (batch, heads, sequence, head dim), and a value type avoids allocating per tensor view.
class Shape {
 public:
  static constexpr std::size_t kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  std::size_t rank() const { return rank_; }
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  std::int64_t numel() const;
  const std::int64_t* begin() const { return dims_.data(); }
  const std::int64_t* end() const { return dims_.data() + rank_; }
  bool operator==(const Shape& other) const;
  std::string to_string() const;  // "[4, 256, 768]"

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  std::size_t rank_ = 0;
};

}  // namespace mds::tensor
