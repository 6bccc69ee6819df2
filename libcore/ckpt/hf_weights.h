// The weights of a Hugging Face model folder, in whichever layout transformers saved them:
// model.safetensors; sharded safetensors (model-0000k-of-0000n.safetensors with
// model.safetensors.index.json); pytorch_model.bin (a torch.save zip); or sharded .bin files with
// pytorch_model.bin.index.json. Safetensors are preferred when both exist, as from_pretrained
// prefers them. Nothing is copied except non-contiguous torch tensors.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "io/torch_file.h"
#include "tensor/dtype.h"

namespace mds::ckpt {

struct HfWeight {
  std::string name;
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::string_view bytes;  // little-endian, row-major
  std::string file;        // the file holding it, for messages
};

class HfWeights {
 public:
  // Fails with one line naming the folder when it holds none of the four layouts, or naming the
  // file (an index's shard, a tensor an index lists but its shard lacks) that is broken.
  static HfWeights open(const std::string& dir);

  // The weight called `name`, or nullptr.
  const HfWeight* find(std::string_view name) const;
  // The file or index the weights come from, for messages.
  const std::string& source() const { return source_; }

 private:
  void add_safetensors(const std::string& path, const std::vector<std::string>* names);
  void add_torch_file(const std::string& path, const std::vector<std::string>* names);
  void add_index(const std::string& dir, const std::string& index, bool safetensors);

  std::string source_;
  std::deque<io::SafetensorsFile> safetensors_;
  std::deque<io::TorchFile> torch_files_;
  std::deque<std::string> copies_;
  std::map<std::string, HfWeight, std::less<>> weights_;
};

}  // namespace mds::ckpt
