#include "ckpt/reshard_source.h"

#include <filesystem>
#include <optional>

#include "base/error.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/reshard_native.h"
#include "ckpt/reshard_tp.h"
#include "io/torch_file.h"
#include "model/tp_merge.h"
#include "ops/elementwise.h"

namespace mds::ckpt {

namespace {

io::TorchFile open_source_file(const std::string& folder, const std::string& name) {
  const std::string path = folder + "/" + name;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) base::fail(path, ": missing from the checkpoint");
  return io::TorchFile::open(path);
}

std::int64_t saved_size(const io::ValueRef& fields, const std::string& name) {
  const std::optional<io::ValueRef> value = fields.get(name);
  if (!value) base::fail("its args have no ", name);
  const std::int64_t size = value->as_int();
  if (size < 1) base::fail("args.", name, " is ", size);
  return size;
}

}  // namespace

OptimizerLayout source_layout(tensor::DType dtype, bool has_param_shapes) {
  switch (dtype) {
    case tensor::DType::kBFloat16:
      return OptimizerLayout::kBf16;
    case tensor::DType::kFloat16:
      return has_param_shapes ? OptimizerLayout::kFp16Zero1 : OptimizerLayout::kFp16;
    default:
      return has_param_shapes ? OptimizerLayout::kFp32Zero : OptimizerLayout::kFp32;
  }
}

void read_source_args(const io::ValueRef& root, SourceCheckpoint& source) {
  const io::ValueRef args = root["args"];
  if (!args.value().is(io::Value::Kind::kObject) ||
      args.value().qualified_name() != "argparse.Namespace") {
    args.fail_expected("an argparse.Namespace");
  }
  source.args = args.value();
  const io::ValueRef fields = args.object_state();
  source.tp_size = saved_size(fields, "tensor_model_parallel_size");
  source.pp_size = saved_size(fields, "pipeline_model_parallel_size");
  const io::ValueRef info = root["checkpoint_info"];
  source.padded_vocab_size = info["padded_vocab_size"].as_int();
  source.original_vocab_size = info["original_vocab_size"].as_int();
}

SourceCheckpoint inspect_source_checkpoint(const std::string& dir) {
  SourceCheckpoint source;
  source.dir = dir;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    base::fail("--load ", dir, ": no such checkpoint folder");
  }
  const std::optional<std::string> tag = read_latest_tag(dir);
  if (!tag) {
    if (const std::optional<std::string> tracker =
            read_text_file_if_exists(dir + "/" + kMegatronTracker)) {
      return inspect_megatron_checkpoint(dir, *tracker);
    }
    base::fail("--load ", dir, ": no 'latest' (or Megatron '", kMegatronTracker,
               "') file, so no checkpoint to read");
  }
  if (tag->empty() || tag->find('/') != std::string::npos || *tag == "." || *tag == "..") {
    base::fail(dir, "/latest: '", *tag, "' is not a checkpoint tag");
  }
  source.tag = *tag;
  source.output_tag = *tag;
  source.folder = dir + "/" + *tag;
  if (!std::filesystem::is_directory(source.folder, error)) {
    base::fail(source.folder, ": no such checkpoint folder (named by ", dir, "/latest)");
  }

  const std::string states_name = model_states_file_name(0);
  const io::TorchFile states = open_source_file(source.folder, states_name);
  const std::string path = states.name();
  try {
    const io::ValueRef root = states.root_ref();
    read_source_args(root, source);
    const std::int64_t mp_size = root["mp_world_size"].as_int();
    if (mp_size != source.tp_size * source.pp_size) {
      base::fail("mp_world_size is ", mp_size, " but its args say T = ", source.tp_size,
                 " × P = ", source.pp_size);
    }
    const bool has_param_shapes = !root["param_shapes"].is_none();
    const io::TorchFile embedding = open_source_file(
        source.folder, model::layer_file_name(model::GptConfig::kEmbeddingSpec, 0));
    source.dtype = embedding.root_ref()["word_embeddings.weight"].as_tensor().dtype;
    source.layout = source_layout(source.dtype, has_param_shapes);
  } catch (const base::Error& e) {
    const std::string what = e.what();
    if (what.rfind(source.folder, 0) == 0) throw;
    base::fail(path, ": ", what);
  }
  return source;
}

namespace {

model::GptConfig whole_model(const model::GptConfig& config) {
  model::GptConfig whole = config;
  whole.tensor_parallel_size = 1;
  whole.tp_rank = 0;
  whole.stage_first_spec = 0;
  whole.stage_end_spec = -1;
  return whole;
}

}  // namespace

void check_source_files(const SourceCheckpoint& source, const model::GptConfig& config) {
  if (source.format == SourceCheckpoint::Format::kMegatron) {
    check_megatron_files(source);
    return;
  }
  const model::ParamTable table = model::ParamTable::build(whole_model(config));
  std::error_code error;
  const auto require = [&](const std::string& name) {
    const std::string path = source.folder + "/" + name;
    if (!std::filesystem::exists(path, error)) {
      base::fail(path, ": missing from the checkpoint (a T = ", source.tp_size,
                 " × P = ", source.pp_size,
                 " checkpoint has a layer file per spec and TP rank and an mp_rank "
                 "file per (pp, tp))");
    }
  };
  for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
    for (const std::int64_t layer : table.saved_layers()) {
      require(model::layer_file_name(layer, tp));
    }
  }
  for (std::int64_t mp = 0; mp < source.tp_size * source.pp_size; ++mp) {
    require(model_states_file_name(mp));
  }
}

namespace {

// TP rank `tp`'s layer files into `shard`; rank 0 also fills the client state.
void load_deepspeed_shard(const SourceCheckpoint& source, std::int64_t tp,
                          const model::ParamBuffer& shard, MergedSource* client) {
  TrainingState state;
  state.table = &shard.table();
  state.layout = source.layout;
  state.params = shard.flat();
  state.ranks.tp = tp;
  state.ranks.tp_size = source.tp_size;
  state.ranks.pp_size = source.pp_size;
  LoadOptions options;
  options.load_optimizer = false;
  options.load_rng = false;
  options.weights_only = true;
  const LoadedCheckpoint loaded = load_deepspeed_checkpoint(source.dir, source.tag, state, options);
  if (client == nullptr) return;
  client->counters = state;
  client->counters.table = nullptr;
  client->counters.params = {};
  client->ds_config = loaded.ds_config;
}

// Where a replicated parameter of TP rank `tp` came from, for the message when it differs.
std::string source_file_of(const SourceCheckpoint& source, const model::GptConfig& config,
                           const model::ParamSpec& param, std::int64_t tp) {
  if (source.format == SourceCheckpoint::Format::kDeepSpeed) {
    return source.folder + "/" + model::layer_file_name(param.layer, tp);
  }
  std::int64_t stage = 0;
  if (param.layer == config.final_layernorm_spec()) {
    stage = source.pp_size - 1;
  } else if (param.layer != model::GptConfig::kEmbeddingSpec) {
    stage = (param.layer - model::GptConfig::layer_spec(0)) / (config.num_layers / source.pp_size);
  }
  return source.folder + "/" + megatron_rank_folder(tp, stage, source.pp_size) + "/" +
         "model_optim_rng.pt";
}

}  // namespace

MergedSource load_merged_source(const SourceCheckpoint& source, const model::GptConfig& config,
                                const base::Log& log) {
  const model::GptConfig whole = whole_model(config);
  MergedSource merged;
  merged.table = std::make_unique<model::ParamTable>(model::ParamTable::build(whole));
  merged.weights = std::make_unique<model::ParamBuffer>(*merged.table, tensor::DType::kFloat32);
  if (source.format == SourceCheckpoint::Format::kMegatron) merged.ds_config = io::Value::dict();

  std::unique_ptr<model::ParamTable> rank0_table;
  std::unique_ptr<model::ParamBuffer> rank0;
  for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
    model::GptConfig shard_config = whole;
    shard_config.tensor_parallel_size = source.tp_size;
    shard_config.tp_rank = tp;
    auto table = std::make_unique<model::ParamTable>(model::ParamTable::build(shard_config));
    auto shard = std::make_unique<model::ParamBuffer>(*table, source.dtype);
    log.info(" reading TP rank " + std::to_string(tp) + " of " + std::to_string(source.tp_size) +
             " (" + std::to_string(source.pp_size) + " pipeline stages)");
    if (source.format == SourceCheckpoint::Format::kMegatron) {
      load_megatron_shard(source, tp, config.num_layers, *shard,
                          tp == 0 ? &merged.counters : nullptr);
    } else {
      load_deepspeed_shard(source, tp, *shard, tp == 0 ? &merged : nullptr);
    }
    if (tp > 0) {
      check_tp_replicas_equal(*rank0, *shard, [&](const model::ParamSpec& param) {
        return source_file_of(source, whole, param, tp);
      });
    }
    if (source.dtype == tensor::DType::kFloat32) {
      model::merge_tp_shard(*shard, source.tp_size, *merged.weights);
    } else {
      // 16-bit values widen to fp32 exactly, and narrow back unchanged when written.
      const model::ParamBuffer wide(*table, tensor::DType::kFloat32);
      ops::cast(wide.flat(), shard->flat());
      model::merge_tp_shard(wide, source.tp_size, *merged.weights);
    }
    if (tp == 0) {
      rank0_table = std::move(table);
      rank0 = std::move(shard);
    }
  }
  return merged;
}

}  // namespace mds::ckpt
