#include "ckpt/universal_source.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/megatron_args.h"
#include "io/torch_file.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"

namespace mds::ckpt {

namespace fs = std::filesystem;

namespace {

std::int64_t required_int(const io::ValueRef& fields, const std::string& name) {
  const std::optional<io::ValueRef> value = fields.get(name);
  if (!value) base::fail("args have no ", name);
  return value->as_int();
}

std::optional<std::int64_t> optional_int(const io::ValueRef& fields, const std::string& name) {
  const std::optional<io::ValueRef> value = fields.get(name);
  if (!value || value->is_none()) return std::nullopt;
  return value->as_int();
}

bool optional_bool(const io::ValueRef& fields, const std::string& name) {
  const std::optional<io::ValueRef> value = fields.get(name);
  return value && !value->is_none() && value->as_bool();
}

model::PositionEmbedding position_embedding_of(const io::ValueRef& fields) {
  const std::optional<io::ValueRef> value = fields.get("position_embedding_type");
  if (!value) return model::PositionEmbedding::kAbsolute;  // before the flag existed
  const std::optional<config::PositionEmbeddingType> type =
      saved_position_embedding_type(value->value());
  if (!type) value->fail_expected("a megatron.enums.PositionEmbeddingType");
  switch (*type) {
    case config::PositionEmbeddingType::kRotary:
      return model::PositionEmbedding::kRotary;
    case config::PositionEmbeddingType::kAlibi:
      return model::PositionEmbedding::kAlibi;
    case config::PositionEmbeddingType::kAbsolute:
      break;
  }
  return model::PositionEmbedding::kAbsolute;
}

// The wrapper that wrote the files: BF16_Optimizer for bf16 weights; for fp32 and fp16, ZeRO
// (partitioned) when the model-states file lists param_shapes, which DeepSpeed writes only then.
OptimizerLayout layout_of(tensor::DType dtype, bool has_param_shapes) {
  switch (dtype) {
    case tensor::DType::kBFloat16:
      return OptimizerLayout::kBf16;
    case tensor::DType::kFloat16:
      return has_param_shapes ? OptimizerLayout::kFp16Zero1 : OptimizerLayout::kFp16;
    default:
      return has_param_shapes ? OptimizerLayout::kFp32Zero : OptimizerLayout::kFp32;
  }
}

// Where the checkpoint is: --input_folder itself, or the tag its `latest` names.
void locate(const std::string& input, UniversalSource& source) {
  std::error_code error;
  if (!fs::is_directory(input, error)) base::fail("--input_folder ", input, ": no such folder");
  // Absolute, so that "." and a trailing slash still give the tag folder its name.
  fs::path path = fs::absolute(input).lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
  if (fs::exists(path / model_states_file_name(0), error)) {
    source.tag = path.filename().string();
    source.dir = path.has_parent_path() ? path.parent_path().string() : ".";
  } else if (const std::optional<std::string> tag = read_latest_tag(path.string())) {
    if (tag->empty() || tag->find('/') != std::string::npos || *tag == "." || *tag == "..") {
      base::fail((path / "latest").string(), ": '", *tag, "' is not a checkpoint tag");
    }
    source.tag = *tag;
    source.dir = path.string();
    source.tag_from_latest = true;
    if (!fs::is_directory(path / *tag, error)) {
      base::fail((path / *tag).string(), ": no such checkpoint folder (named by ",
                 (path / "latest").string(), ")");
    }
  } else {
    base::fail("--input_folder ", input, ": neither a checkpoint folder (no ",
               model_states_file_name(0), ") nor a checkpoint root (no 'latest' file)");
  }
  source.folder = source.dir + "/" + source.tag;
}

void read_model_states(UniversalSource& source) {
  const std::string path = source.folder + "/" + model_states_file_name(0);
  std::error_code error;
  if (!fs::exists(path, error)) base::fail(path, ": missing from the checkpoint");
  const io::TorchFile file = io::TorchFile::open(path);
  bool has_param_shapes = false;
  std::string partition_method;
  base::within_file(path, [&] {
    const io::ValueRef root = file.root_ref();
    const io::ValueRef args = root["args"];
    if (!args.value().is(io::Value::Kind::kObject) ||
        args.value().qualified_name() != "argparse.Namespace") {
      args.fail_expected("an argparse.Namespace");
    }
    const io::ValueRef fields = args.object_state();
    source.tp_size = required_int(fields, "tensor_model_parallel_size");
    source.pp_size = required_int(fields, "pipeline_model_parallel_size");
    if (source.tp_size < 1 || source.pp_size < 1) {
      base::fail("args: tensor_model_parallel_size ", source.tp_size,
                 ", pipeline_model_parallel_size ", source.pp_size);
    }
    const std::int64_t mp_size = root["mp_world_size"].as_int();
    if (mp_size != source.tp_size * source.pp_size) {
      base::fail("mp_world_size is ", mp_size, " but its args say T = ", source.tp_size,
                 " × P = ", source.pp_size);
    }
    source.dp_size = root["dp_world_size"].as_int();
    if (source.dp_size < 1) base::fail("dp_world_size is ", source.dp_size);
    const io::ValueRef info = root["checkpoint_info"];
    source.padded_vocab_size = info["padded_vocab_size"].as_int();
    source.original_vocab_size = info["original_vocab_size"].as_int();
    if (source.original_vocab_size < 1 || source.original_vocab_size > source.padded_vocab_size) {
      base::fail("checkpoint_info: original_vocab_size ", source.original_vocab_size,
                 " and padded_vocab_size ", source.padded_vocab_size, " do not fit");
    }
    if (const std::optional<std::int64_t> padded = optional_int(fields, "padded_vocab_size");
        padded && *padded != source.padded_vocab_size) {
      base::fail("args.padded_vocab_size ", *padded, " differs from checkpoint_info's ",
                 source.padded_vocab_size);
    }
    has_param_shapes = !root["param_shapes"].is_none();
    // Without ZeRO the optimizer state sits here; with it, param_shapes describes the ZeRO files.
    if (!has_param_shapes && root["optimizer"].is_none()) {
      base::fail("optimizer: none saved (written with --no-save-optim?); a universal checkpoint ",
                 "needs the fp32 masters and Adam moments");
    }
    source.config = config_from_saved_args(args, source.padded_vocab_size);
    source.config.tensor_parallel_size = source.tp_size;
    model::validate(source.config);
    if (source.config.position_embedding == model::PositionEmbedding::kRotary) {
      source.rotary_head_dim = source.config.head_dim();
    }
    const std::optional<io::ValueRef> method = fields.get("pp_partition_method");
    partition_method = method && !method->is_none() ? method->as_string()
                                                    : std::string("type:transformer");  // fork's
  });
  // The weights' dtype tells the precision, param_shapes whether the state is partitioned.
  const std::string embedding =
      source.folder + "/" + model::layer_file_name(model::GptConfig::kEmbeddingSpec, 0);
  if (!fs::exists(embedding, error)) base::fail(embedding, ": missing from the checkpoint");
  const io::TorchFile layer = io::TorchFile::open(embedding);
  tensor::DType dtype = tensor::DType::kFloat32;
  base::within_file(embedding,
                    [&] { dtype = layer.root_ref()["word_embeddings.weight"].as_tensor().dtype; });
  source.layout = layout_of(dtype, has_param_shapes);
  base::within_file(path, [&] {
    source.parts = model::pipeline_partition(source.config, dtype != tensor::DType::kFloat32,
                                             source.pp_size, partition_method);
  });
}

// The folder holds exactly the files of the grid (what upstream infers from file counts is
// checked against the saved degrees instead).
void check_inventory(const UniversalSource& source) {
  std::set<std::string> expected;
  for (std::int64_t mp = 0; mp < source.tp_size * source.pp_size; ++mp) {
    expected.insert(model_states_file_name(mp));
    if (!has_zero_file(source.layout)) continue;
    for (std::int64_t dp = 0; dp < source.dp_size; ++dp) {
      expected.insert(source.zero_name(dp, mp));
    }
  }
  for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
    expected.insert(model::layer_file_name(model::GptConfig::kEmbeddingSpec, tp));
  }
  static const std::regex kCounted(
      R"((bf16_)?zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt|mp_rank_\d+_model_states\.pt|)"
      R"(layer_01-model_\d+-model_states\.pt)");
  std::set<std::string> found;
  std::error_code error;
  fs::directory_iterator entries(source.folder, error);
  if (error) base::fail("cannot list ", source.folder, ": ", error.message());
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, kCounted)) continue;
    if (!expected.count(name)) {
      base::fail(source.folder, "/", name, ": unexpected in a checkpoint of T = ", source.tp_size,
                 " × P = ", source.pp_size, " × D = ", source.dp_size, " written with the ",
                 layout_name(source.layout),
                 " optimizer layout (a file from another save or another grid?)");
    }
    found.insert(name);
  }
  const bool any_zero_file = std::any_of(found.begin(), found.end(), [](const std::string& name) {
    return name.find("zero_pp_rank_") != std::string::npos;
  });
  for (const std::string& name : expected) {
    if (!found.count(name)) {
      const bool no_optimizer = has_zero_file(source.layout) && !any_zero_file;
      base::fail(source.folder, "/", name, ": missing from the checkpoint (T = ", source.tp_size,
                 " × P = ", source.pp_size, " × D = ", source.dp_size, ", ",
                 layout_name(source.layout), " optimizer layout",
                 no_optimizer ? "; no ZeRO file at all: written with --no-save-optim?" : "", ")");
    }
  }
}

}  // namespace

model::GptConfig UniversalSource::stage_config(std::int64_t pp, std::int64_t tp) const {
  model::GptConfig stage = config;
  stage.tp_rank = tp;
  model::set_stage_specs(stage, parts, pp);
  return stage;
}

std::string UniversalSource::model_states_path(std::int64_t pp, std::int64_t tp) const {
  return folder + "/" + model_states_file_name(pp * tp_size + tp);
}

std::string UniversalSource::optimizer_path(std::int64_t pp, std::int64_t tp,
                                            std::int64_t dp) const {
  if (!has_zero_file(layout)) return model_states_path(pp, tp);
  return folder + "/" + zero_name(dp, pp * tp_size + tp);
}

std::string UniversalSource::zero_name(std::int64_t dp, std::int64_t mp) const {
  const std::string name = zero_file_name(layout, dp, mp);
  if (!other_zero_naming) return name;
  return layout == OptimizerLayout::kBf16 ? name.substr(5) : "bf16_" + name;
}

model::GptConfig config_from_saved_args(const io::ValueRef& args, std::int64_t padded_vocab_size) {
  const io::ValueRef fields = args.object_state();
  model::GptConfig c;
  c.num_layers = required_int(fields, "num_layers");
  c.hidden_size = required_int(fields, "hidden_size");
  c.num_attention_heads = required_int(fields, "num_attention_heads");
  c.ffn_hidden_size = optional_int(fields, "ffn_hidden_size").value_or(0);
  c.seq_length = required_int(fields, "seq_length");
  c.max_position_embeddings =
      optional_int(fields, "max_position_embeddings").value_or(c.seq_length);
  c.padded_vocab_size = padded_vocab_size;
  c.position_embedding = position_embedding_of(fields);
  c.embed_layernorm = optional_bool(fields, "embed_layernorm");
  if (const std::optional<io::ValueRef> glu = fields.get("glu_activation");
      glu && !glu->is_none()) {
    base::fail("args.glu_activation is '", glu->as_string(),
               "': GLU MLPs are not supported (their dense_h_to_4h halves merge differently)");
  }
  if (const std::optional<std::int64_t> kv = optional_int(fields, "kv_channels");
      kv && c.num_attention_heads > 0 && *kv * c.num_attention_heads != c.hidden_size) {
    base::fail("args.kv_channels is ", *kv,
               ", not hidden_size / num_attention_heads: not supported");
  }
  if (const std::optional<io::ValueRef> std = fields.get("init_method_std");
      std && !std->is_none()) {
    c.init_method_std = std->as_float();
  }
  return c;
}

UniversalSource inspect_universal_source(const std::string& input_folder) {
  UniversalSource source;
  locate(input_folder, source);
  read_model_states(source);
  if (has_zero_file(source.layout)) {
    // DeepSpeed's engine and converter take either naming; the first rank's file tells which.
    std::error_code error;
    UniversalSource other = source;
    other.other_zero_naming = true;
    source.other_zero_naming = !fs::exists(source.folder + "/" + source.zero_name(0, 0), error) &&
                               fs::exists(other.folder + "/" + other.zero_name(0, 0), error);
  }
  check_inventory(source);
  return source;
}

}  // namespace mds::ckpt
