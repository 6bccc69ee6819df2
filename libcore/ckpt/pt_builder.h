// Builds the Value tree of one .pt file together with the storages its tensors point into.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "io/pickle_value.h"
#include "io/torch_file.h"
#include "tensor/dtype.h"

namespace mds::ckpt {

class PtBuilder {
 public:
  explicit PtBuilder(std::string location) : location_(std::move(location)) {}
  PtBuilder(const PtBuilder&) = delete;
  PtBuilder& operator=(const PtBuilder&) = delete;

  // A tensor of `shape` over the first elements of a new storage holding `bytes`, which the
  // caller keeps alive until write(). Each call is its own storage, as torch.save writes a
  // cloned tensor; a shape smaller than the storage is a narrowed view (the storage is written
  // whole, as torch does).
  io::Value view(std::string_view bytes, tensor::DType dtype, std::vector<std::int64_t> shape,
                 bool requires_grad = false);
  // Same over bytes the builder keeps.
  io::Value own(std::string bytes, tensor::DType dtype, std::vector<std::int64_t> shape,
                bool requires_grad = false);

  // Writes the file atomically.
  void write(const std::string& path, const io::Value& root) const;

 private:
  std::string location_;
  io::TorchStorages storages_;
  std::deque<std::string> owned_;  // deque: growing it never moves the strings' bytes
  int next_key_ = 0;
};

}  // namespace mds::ckpt
