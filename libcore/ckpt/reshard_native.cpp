#include "ckpt/reshard_native.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/deepspeed_objects.h"
#include "io/torch_file.h"

namespace mds::ckpt {

namespace {

constexpr const char* kRankFile = "model_optim_rng.pt";

std::string rank_file(const SourceCheckpoint& source, std::int64_t tp, std::int64_t pp) {
  return source.folder + "/" + megatron_rank_folder(tp, pp, source.pp_size) + "/" + kRankFile;
}

// Every tensor below `ref` with its dotted path (nested state dicts flattened).
void collect_tensors(const io::ValueRef& ref, const std::string& prefix,
                     std::vector<std::pair<std::string, io::ValueRef>>& out) {
  const io::Value& value = ref.value();
  if (value.is(io::Value::Kind::kTensor)) {
    out.emplace_back(prefix, ref);
    return;
  }
  if (!value.is_dict_like()) ref.fail_expected("a state dict or a tensor");
  for (const io::Value& key : value.keys()) {
    if (!key.is(io::Value::Kind::kString)) ref.fail_expected("a state dict with str keys");
    const std::string name = key.as_string();
    collect_tensors(ref[name], prefix.empty() ? name : prefix + "." + name, out);
  }
}

}  // namespace

std::string megatron_tag(const std::string& tracker_text, const std::string& tracker_path) {
  const std::string text = base::trimmed(tracker_text);
  if (text == "release") return text;
  if (text.empty() || text.size() > 15 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    base::fail(tracker_path, ": '", text, "' is neither an iteration number nor 'release'");
  }
  char tag[32];
  std::snprintf(tag, sizeof tag, "iter_%07lld", std::stoll(text));
  return tag;
}

std::string megatron_rank_folder(std::int64_t tp, std::int64_t pp, std::int64_t pp_size) {
  char name[48];
  if (pp_size == 1) {
    std::snprintf(name, sizeof name, "mp_rank_%02lld", static_cast<long long>(tp));
  } else {
    std::snprintf(name, sizeof name, "mp_rank_%02lld_%03lld", static_cast<long long>(tp),
                  static_cast<long long>(pp));
  }
  return name;
}

std::optional<std::pair<std::int64_t, std::string>> megatron_param_spec(const std::string& path,
                                                                        std::int64_t pp,
                                                                        std::int64_t pp_size,
                                                                        std::int64_t num_layers) {
  const auto strip = [&](const std::string& prefix) -> std::optional<std::string> {
    if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size()) return std::nullopt;
    return path.substr(prefix.size());
  };
  if (const auto key = strip("embedding.")) {
    if (pp != 0) return std::nullopt;
    return std::pair{model::GptConfig::kEmbeddingSpec, *key};
  }
  // Older Megatron names the encoder `transformer`.
  std::optional<std::string> rest = strip("encoder.");
  if (!rest) rest = strip("transformer.");
  if (!rest) return std::nullopt;
  if (rest->rfind("final_layernorm.", 0) == 0) {
    if (pp != pp_size - 1) return std::nullopt;
    return std::pair{num_layers + 4, rest->substr(std::strlen("final_layernorm."))};
  }
  if (rest->rfind("layers.", 0) != 0) return std::nullopt;
  const std::string numbered = rest->substr(std::strlen("layers."));
  const std::size_t dot = numbered.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 == numbered.size() ||
      numbered.find_first_not_of("0123456789") < dot) {
    return std::nullopt;
  }
  const std::int64_t local = std::stoll(numbered.substr(0, dot));
  const std::int64_t per_stage = num_layers / pp_size;
  if (local >= per_stage) return std::nullopt;
  return std::pair{model::GptConfig::layer_spec(pp * per_stage + local), numbered.substr(dot + 1)};
}

SourceCheckpoint inspect_megatron_checkpoint(const std::string& dir,
                                             const std::string& tracker_text) {
  SourceCheckpoint source;
  source.format = SourceCheckpoint::Format::kMegatron;
  source.dir = dir;
  source.tag = megatron_tag(tracker_text, dir + "/" + kMegatronTracker);
  source.folder = dir + "/" + source.tag;
  std::error_code error;
  if (!std::filesystem::is_directory(source.folder, error)) {
    base::fail(source.folder, ": no such checkpoint folder (named by ", dir, "/", kMegatronTracker,
               ")");
  }
  // Rank (0, 0) is mp_rank_00 without pipelining, mp_rank_00_000 with it.
  std::string path = source.folder + "/" + megatron_rank_folder(0, 0, 1) + "/" + kRankFile;
  if (!std::filesystem::exists(path, error)) {
    path = source.folder + "/" + megatron_rank_folder(0, 0, 2) + "/" + kRankFile;
  }
  if (!std::filesystem::exists(path, error)) {
    base::fail(source.folder, ": no mp_rank_00/", kRankFile, " or mp_rank_00_000/", kRankFile);
  }
  const io::TorchFile file = io::TorchFile::open(path);
  base::within_file(path, [&] {
    const io::ValueRef root = file.root_ref();
    read_source_args(root, source);
    const double version = root["checkpoint_version"].as_float();
    if (version != 2.0 && version != 3.0) {
      base::fail("checkpoint_version ", version,
                 " is not supported (the fused QKV rows of 2.0/3.0 only)");
    }
    if (root.get("model0")) {
      base::fail("virtual pipeline stages (model0, model1, …) are not supported");
    }
    const io::ValueRef words = root["model"]["language_model"]["embedding"]["word_embeddings"];
    source.dtype = words["weight"].as_tensor().dtype;
    source.layout = source_layout(source.dtype, false);
    const std::int64_t iteration = source.tag == "release" ? 0 : read_integer(root["iteration"]);
    source.output_tag = tag_for_step(iteration);
  });
  return source;
}

void check_megatron_files(const SourceCheckpoint& source) {
  std::error_code error;
  for (std::int64_t pp = 0; pp < source.pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
      const std::string path = rank_file(source, tp, pp);
      if (!std::filesystem::exists(path, error)) {
        base::fail(path, ": missing from the checkpoint (a T = ", source.tp_size,
                   " × P = ", source.pp_size, " Megatron checkpoint has one per (tp, pp))");
      }
    }
  }
}

void load_megatron_shard(const SourceCheckpoint& source, std::int64_t tp, std::int64_t num_layers,
                         const model::ParamBuffer& shard, TrainingState* counters) {
  const model::ParamTable& table = shard.table();
  if (num_layers % source.pp_size != 0) {
    base::fail(source.folder, ": ", num_layers, " layers do not split into ", source.pp_size,
               " equal Megatron pipeline stages");
  }
  std::vector<bool> found(table.size(), false);
  const std::size_t size = tensor::dtype_size(source.dtype);
  for (std::int64_t pp = 0; pp < source.pp_size; ++pp) {
    const std::string path = rank_file(source, tp, pp);
    const io::TorchFile file = io::TorchFile::open(path);
    file.verify_checksums();
    base::within_file(path, [&] {
      const io::ValueRef root = file.root_ref();
      const io::ValueRef model_tree = root["model"];
      std::vector<std::pair<std::string, io::ValueRef>> tensors;
      collect_tensors(model_tree["language_model"], "", tensors);
      for (const auto& [name, ref] : tensors) {
        const auto spec = megatron_param_spec(name, pp, source.pp_size, num_layers);
        const std::optional<std::size_t> index =
            spec ? table.find(spec->first, spec->second) : std::nullopt;
        if (!index || found[*index]) {
          base::fail("model.language_model.", name, ": unexpected (a different model?)");
        }
        found[*index] = true;
        const io::TensorRef& t = ref.as_tensor();
        const model::ParamSpec& param = table[*index];
        if (t.dtype != source.dtype) {
          base::fail(ref.path(), ": dtype ", tensor::dtype_name(t.dtype), ", expected ",
                     tensor::dtype_name(source.dtype));
        }
        if (t.shape !=
            std::vector<std::int64_t>(param.local_shape.begin(), param.local_shape.end())) {
          base::fail(ref.path(), ": expected shape ", param.local_shape.to_string());
        }
        const std::string bytes = file.tensor_bytes(t);
        std::memcpy(shard.view(*index).raw(), bytes.data(),
                    static_cast<std::size_t>(param.local_numel()) * size);
      }
      for (const io::Value& key : model_tree.value().keys()) {
        if (!key.is(io::Value::Kind::kString) || (key.as_string() != "language_model" &&
                                                  key.as_string() != "word_embeddings_for_head")) {
          base::fail("model: unexpected entry (only language_model and word_embeddings_for_head)");
        }
      }
      if (counters != nullptr && pp == 0) {
        counters->iteration = source.tag == "release" ? 0 : read_integer(root["iteration"]);
        counters->global_steps = counters->iteration;
        if (const auto tokens = root.get("tokens")) {
          counters->consumed_train_tokens = read_integer(*tokens);
        }
        const io::ValueRef fields = root["args"].object_state();
        if (const auto samples = fields.get("consumed_train_samples")) {
          counters->consumed_train_samples = read_integer(*samples);
        }
        if (const auto samples = fields.get("consumed_valid_samples")) {
          counters->consumed_valid_samples = read_integer(*samples);
        }
        counters->global_samples = counters->consumed_train_samples;
        if (const auto scheduler = root.get("lr_scheduler")) {
          counters->lr_scheduler = read_lr_scheduler_dict(*scheduler);
        }
      }
    });
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (!found[i] && !table[i].tied_replica) {
      base::fail(source.folder, ": TP rank ", tp, " has no ", table[i].engine_name(),
                 " in the model_optim_rng.pt of any pipeline stage");
    }
  }
}

}  // namespace mds::ckpt
