#include "tasks/inference_model.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/megatron_args.h"
#include "ckpt/resume_universal.h"
#include "io/torch_file.h"
#include "model/tp_merge.h"
#include "ops/elementwise.h"
#include "text/tokenizer_factory.h"
#include "train/model_args.h"

namespace mds::tasks {

model::ModelOptions inference_model_options(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab) {
  model::ModelOptions options = train::model_options_from_args(args, padded_vocab);
  options.hidden_dropout = 0.0f;
  options.attention_dropout = 0.0f;
  options.checkpoint_activations = false;
  return options;
}

namespace {

// A layout with the weights' dtype; the optimizer files are not read (weights only).
ckpt::OptimizerLayout layout_for(const config::PretrainArgs& args) {
  if (args.bf16) return ckpt::OptimizerLayout::kBf16;
  return args.fp16 ? ckpt::OptimizerLayout::kFp16 : ckpt::OptimizerLayout::kFp32;
}

}  // namespace

namespace {

struct SavedGrid {
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
};

// The tensor- and pipeline-parallel sizes the checkpoint was trained with (its saved args).
SavedGrid saved_grid(const io::ValueRef& saved_args) {
  const io::ValueRef fields = saved_args.object_state();
  SavedGrid grid;
  if (const auto pipeline = fields.get("pipeline_model_parallel_size")) {
    grid.pp_size = pipeline->as_int();
  }
  if (const auto tensor = fields.get("tensor_model_parallel_size")) grid.tp_size = tensor->as_int();
  return grid;
}

// Loads the weights of TP rank `tp_rank` as fp32 into `weights`. The layer files of every
// pipeline stage lie in one folder under the same names, so the whole model's table finds each
// stage's layers; the model-states file read is stage 0's.
std::int64_t load_shard(const std::string& dir, const std::string& tag,
                        const config::PretrainArgs& args, const model::ParamBuffer& weights,
                        std::int64_t tp_rank, const SavedGrid& grid) {
  ckpt::TrainingState state;
  state.table = &weights.table();
  state.ranks.tp = tp_rank;
  state.ranks.tp_size = grid.tp_size;
  state.ranks.pp_size = grid.pp_size;
  state.layout = layout_for(args);
  std::unique_ptr<model::ParamBuffer> half;
  if (state.layout == ckpt::OptimizerLayout::kFp32) {
    state.params = weights.flat();
  } else {
    // The 16-bit weights upstream's model computes with are widened to fp32 (architecture.md §4:
    // 16-bit storage, fp32 compute on the CPU).
    half = std::make_unique<model::ParamBuffer>(weights.table(), ckpt::params_dtype(state.layout));
    state.params = half->flat();
  }
  ckpt::LoadOptions options;
  options.load_optimizer = false;
  options.load_rng = false;
  options.weights_only = true;
  ckpt::load_deepspeed_checkpoint(dir, tag, state, options);
  if (half) ops::cast(weights.flat(), half->flat());
  return state.iteration;
}

// The fp32 masters of a universal checkpoint as the model's weights (rounded through the 16-bit
// dtype the run trained in, which is what its model computed with).
std::int64_t load_universal_weights(const std::string& folder, const config::PretrainArgs& args,
                                    const model::ParamBuffer& weights, std::int64_t vocab_size) {
  const model::ParamTable& table = weights.table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& spec = table[i];
    const std::string path = folder + "/zero/" + spec.engine_name() + "/fp32.pt";
    const std::vector<float> values = ckpt::universal_slice(
        ckpt::read_universal_tensor(path),
        std::vector<std::int64_t>(spec.local_shape.begin(), spec.local_shape.end()), 0, 1,
        spec.split, vocab_size, path);
    std::copy(values.begin(), values.end(), weights.view(i).host_span<float>().begin());
  }
  const ckpt::OptimizerLayout layout = layout_for(args);
  if (layout != ckpt::OptimizerLayout::kFp32) {
    const model::ParamBuffer half(table, ckpt::params_dtype(layout));
    ops::cast(half.flat(), weights.flat());
    ops::cast(weights.flat(), half.flat());
  }
  const io::TorchFile states = io::TorchFile::open(folder + "/" + ckpt::model_states_file_name(0));
  return states.root_ref()["iteration"].as_int();
}

}  // namespace

InferenceModel load_inference_model(const config::PretrainArgs& args,
                                    const text::Tokenizer& tokenizer, const base::Log& log) {
  InferenceModel m;
  m.vocab_size = tokenizer.vocab_size();
  const std::string& dir = *args.load;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    base::fail("--load ", dir, ": no such checkpoint folder");
  }
  // A universal checkpoint (latest_universal) when asked for, or when it is all there is.
  std::optional<std::string> tag = ckpt::read_latest_tag(dir);
  const std::optional<std::string> universal_tag =
      ckpt::read_text_file_if_exists(dir + "/latest_universal");
  const bool universal = universal_tag && (args.universal_checkpoint || !tag);
  if (universal) tag = universal_tag;
  if (!tag) {
    base::fail("--load ", dir,
               ": no 'latest' (or 'latest_universal') file, so no checkpoint to load");
  }
  m.checkpoint = dir + "/" + *tag;

  // A checkpoint of T TP ranks is loaded shard by shard and merged: the model then runs whole on
  // this process, with the vocabulary padded as the T-way run padded it. Pipeline stages are put
  // together by loading every stage's layer files.
  SavedGrid grid;
  std::int64_t padded = 0;
  {
    const io::TorchFile model_states =
        io::TorchFile::open(m.checkpoint + "/" + ckpt::model_states_file_name(0));
    const io::ValueRef saved_args = model_states.root_ref()["args"];
    grid = saved_grid(saved_args);
    padded = text::padded_vocab_size(m.vocab_size, args.tokenizer, grid.tp_size);
    config::PretrainArgs as_trained = args;
    as_trained.tensor_model_parallel_size = grid.tp_size;
    as_trained.pipeline_model_parallel_size = grid.pp_size;
    ckpt::check_checkpoint_args(saved_args, as_trained, padded, m.checkpoint);
  }
  m.options = inference_model_options(args, padded);
  model::validate(m.options);
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(m.options.config));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);

  const std::int64_t tp_size = grid.tp_size;
  log.info(
      " loading checkpoint from " + dir + " at tag " + *tag +
      (tp_size > 1 ? " (merging " + std::to_string(tp_size) + " TP shards)" : "") +
      (grid.pp_size > 1 ? " (joining " + std::to_string(grid.pp_size) + " pipeline stages)" : ""));
  std::int64_t iteration = 0;
  if (universal) {
    iteration = load_universal_weights(m.checkpoint, args, *m.params, m.vocab_size);
  } else if (tp_size == 1) {
    iteration = load_shard(dir, *tag, args, *m.params, 0, grid);
  } else {
    for (std::int64_t rank = 0; rank < tp_size; ++rank) {
      model::GptConfig shard_config = m.options.config;
      shard_config.tensor_parallel_size = tp_size;
      shard_config.tp_rank = rank;
      const model::ParamTable shard_table = model::ParamTable::build(shard_config);
      const model::ParamBuffer shard(shard_table, tensor::DType::kFloat32);
      iteration = load_shard(dir, *tag, args, shard, rank, grid);
      model::merge_tp_shard(shard, tp_size, *m.params);
    }
  }
  log.info("  successfully loaded checkpoint from " + dir + " at iteration " +
           std::to_string(iteration));
  return m;
}

}  // namespace mds::tasks
