#include "ckpt/hf_weights.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/json_document.h"

namespace mds::ckpt {
namespace {

bool exists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

// Whether `names` (when given) lists `name`.
bool wanted(const std::vector<std::string>* names, const std::string& name) {
  return names == nullptr || std::find(names->begin(), names->end(), name) != names->end();
}

}  // namespace

HfWeights HfWeights::open(const std::string& dir) {
  HfWeights weights;
  if (exists(dir + "/model.safetensors")) {
    weights.source_ = dir + "/model.safetensors";
    weights.add_safetensors(weights.source_, nullptr);
  } else if (exists(dir + "/model.safetensors.index.json")) {
    weights.add_index(dir, "model.safetensors.index.json", true);
  } else if (exists(dir + "/pytorch_model.bin")) {
    weights.source_ = dir + "/pytorch_model.bin";
    weights.add_torch_file(weights.source_, nullptr);
  } else if (exists(dir + "/pytorch_model.bin.index.json")) {
    weights.add_index(dir, "pytorch_model.bin.index.json", false);
  } else {
    base::fail(dir,
               ": no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
               "pytorch_model.bin.index.json");
  }
  return weights;
}

const HfWeight* HfWeights::find(std::string_view name) const {
  const auto found = weights_.find(name);
  return found == weights_.end() ? nullptr : &found->second;
}

void HfWeights::add_safetensors(const std::string& path, const std::vector<std::string>* names) {
  const io::SafetensorsFile& file = safetensors_.emplace_back(io::SafetensorsFile::open(path));
  for (const io::SafetensorsEntry& entry : file.entries()) {
    if (!wanted(names, entry.name)) continue;
    weights_[entry.name] = {entry.name, entry.dtype, entry.shape, file.bytes(entry), path};
  }
}

void HfWeights::add_torch_file(const std::string& path, const std::vector<std::string>* names) {
  const io::TorchFile& file = torch_files_.emplace_back(io::TorchFile::open(path));
  const io::ValueRef root = file.root_ref();
  base::within_file(path, [&] {
    for (const io::Value& key : root.value().keys()) {
      if (!key.is(io::Value::Kind::kString) || !wanted(names, key.as_string())) continue;
      const io::TensorRef& t = root[key.as_string()].as_tensor();
      const std::size_t size = tensor::dtype_size(t.dtype);
      std::string_view bytes;
      if (t.strides == io::TensorRef::contiguous_strides(t.shape)) {
        bytes = file.storage_bytes(t.storage_key)
                    .substr(static_cast<std::size_t>(t.storage_offset) * size,
                            static_cast<std::size_t>(t.numel()) * size);
      } else {
        bytes = copies_.emplace_back(file.tensor_bytes(t));
      }
      weights_[key.as_string()] = {key.as_string(), t.dtype, t.shape, bytes, path};
    }
  });
}

// {"metadata": {...}, "weight_map": {"tensor name": "shard file", ...}}: every shard is read once,
// and every tensor the map lists must be in its shard.
void HfWeights::add_index(const std::string& dir, const std::string& index, bool safetensors) {
  source_ = dir + "/" + index;
  const config::JsonValue root = config::parse_json(base::read_file(source_), source_);
  const config::JsonValue* map = root.is_object() ? root.find("weight_map") : nullptr;
  if (map == nullptr || !map->is_object()) base::fail(source_, ": no \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> shards;
  for (const config::JsonMember& member : map->members()) {
    if (!member.value.is_string()) {
      base::fail(source_, ": weight_map entry '", member.key, "' is not a file name");
    }
    shards[member.value.as_string()].push_back(member.key);
  }
  for (const auto& [shard, names] : shards) {
    const std::string path = dir + "/" + shard;
    if (safetensors) {
      add_safetensors(path, &names);
    } else {
      add_torch_file(path, &names);
    }
    for (const std::string& name : names) {
      if (find(name) == nullptr) base::fail(source_, ": tensor '", name, "' is not in ", path);
    }
  }
}

}  // namespace mds::ckpt
