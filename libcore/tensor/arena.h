#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "tensor/buffer.h"

namespace mds::tensor {

// The tensors a computation needs, laid out in one block before anything runs: training then
// allocates nothing per step, and a model too large for the memory fails at start-up with the
// number of bytes it needed rather than in the middle of a step.
class ArenaPlan {
 public:
  struct Slot {
    std::string name;
    DType dtype;
    Shape shape;
    std::size_t offset;  // bytes from the start of the arena, 64-byte aligned
  };

  // Reserves a tensor; returns its slot index.
  std::size_t add(std::string name, DType dtype, Shape shape);
  const std::vector<Slot>& slots() const { return slots_; }
  std::size_t total_bytes() const { return total_; }

 private:
  std::vector<Slot> slots_;
  std::size_t total_ = 0;
};

// The memory of an ArenaPlan.
class Arena {
 public:
  // Fails with "<what>: cannot allocate N bytes (…)" when the memory cannot be had.
  Arena(const ArenaPlan& plan, Device device, const std::string& what);

  Tensor operator[](std::size_t slot) const;
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  std::vector<ArenaPlan::Slot> slots_;
  Buffer buffer_;
};

}  // namespace mds::tensor
