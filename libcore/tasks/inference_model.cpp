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
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "ops/elementwise.h"
#include "tasks/inference_device.h"
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

// The tensor- and pipeline-parallel sizes the checkpoint was trained with (its saved args).
GridSizes saved_grid(const io::ValueRef& saved_args) {
  const io::ValueRef fields = saved_args.object_state();
  GridSizes grid;
  if (const auto pipeline = fields.get("pipeline_model_parallel_size")) {
    grid.pp = pipeline->as_int();
  }
  if (const auto tensor = fields.get("tensor_model_parallel_size")) grid.tp = tensor->as_int();
  return grid;
}

// Loads the layer files of `weights`' table for the checkpoint ranks `ranks` (their TP rank's
// files; the mp_rank file of ranks.pp) as fp32. The layer files of every pipeline stage lie in
// one folder under the same names, so any stage split (the whole model included) finds them.
std::int64_t load_shard(const std::string& dir, const std::string& tag,
                        const config::PretrainArgs& args, const model::ParamBuffer& weights,
                        const ckpt::CheckpointRanks& ranks) {
  ckpt::TrainingState state;
  state.table = &weights.table();
  state.ranks = ranks;
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

// The whole model (`whole`: T = 1, P = 1) from a checkpoint of any TP size: each TP rank's files
// loaded and merged (model/tp_merge.h), every stage's layer files read.
std::int64_t load_whole(const CheckpointInfo& checkpoint, const config::PretrainArgs& args,
                        const model::GptConfig& whole_config, const model::ParamBuffer& whole) {
  const GridSizes& grid = checkpoint.grid;
  ckpt::CheckpointRanks ranks;
  ranks.tp_size = grid.tp;
  ranks.pp_size = grid.pp;
  if (grid.tp == 1) return load_shard(checkpoint.dir, checkpoint.tag, args, whole, ranks);
  std::int64_t iteration = 0;
  for (std::int64_t rank = 0; rank < grid.tp; ++rank) {
    model::GptConfig shard_config = whole_config;
    shard_config.tensor_parallel_size = grid.tp;
    shard_config.tp_rank = rank;
    const model::ParamTable shard_table = model::ParamTable::build(shard_config);
    const model::ParamBuffer shard(shard_table, tensor::DType::kFloat32);
    ranks.tp = rank;
    iteration = load_shard(checkpoint.dir, checkpoint.tag, args, shard, ranks);
    model::merge_tp_shard(shard, grid.tp, whole);
  }
  return iteration;
}

// The fp32 masters of a universal checkpoint as this rank's weights (its TP slice of each
// parameter of its stage, the last stage's tied copy included), rounded through the 16-bit dtype
// the run trained in, which is what its model computed with.
std::int64_t load_universal_weights(const CheckpointInfo& checkpoint,
                                    const config::PretrainArgs& args,
                                    const model::ParamBuffer& weights, std::int64_t tp_size,
                                    std::int64_t vocab_size) {
  const model::ParamTable& table = weights.table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& spec = table[i];
    const std::string path = checkpoint.folder + "/zero/" + spec.engine_name() + "/fp32.pt";
    const std::vector<float> values = ckpt::universal_slice(
        ckpt::read_universal_tensor(path),
        std::vector<std::int64_t>(spec.local_shape.begin(), spec.local_shape.end()),
        table.tp_rank(), tp_size, spec.split, vocab_size, path);
    std::copy(values.begin(), values.end(), weights.view(i).host_span<float>().begin());
  }
  const ckpt::OptimizerLayout layout = layout_for(args);
  if (layout != ckpt::OptimizerLayout::kFp32) {
    const model::ParamBuffer half(table, ckpt::params_dtype(layout));
    ops::cast(half.flat(), weights.flat());
    ops::cast(weights.flat(), half.flat());
  }
  const io::TorchFile states =
      io::TorchFile::open(checkpoint.folder + "/" + ckpt::model_states_file_name(0));
  return states.root_ref()["iteration"].as_int();
}

// What the log line says about how the weights are put together.
std::string load_description(const CheckpointInfo& checkpoint, const InferenceComms& comms) {
  const GridSizes& saved = checkpoint.grid;
  if (checkpoint.universal) {
    return comms.tp_size * comms.pp_size > 1 ? " (universal: this rank's slices)" : "";
  }
  if (comms.tp_size * comms.pp_size == 1) {
    return (saved.tp > 1 ? " (merging " + std::to_string(saved.tp) + " TP shards)" : "") +
           (saved.pp > 1 ? " (joining " + std::to_string(saved.pp) + " pipeline stages)" : "");
  }
  if (saved.tp == comms.tp_size) {
    return " (each rank reads its TP rank's layer files of its pipeline stage)";
  }
  return " (saved at TP " + std::to_string(saved.tp) + ": merging the whole model on each rank " +
         "and keeping this rank's TP " + std::to_string(comms.tp_size) + " shard)";
}

}  // namespace

CheckpointInfo find_checkpoint(const config::PretrainArgs& args, const text::Tokenizer& tokenizer) {
  CheckpointInfo info;
  info.dir = *args.load;
  std::error_code error;
  if (!std::filesystem::is_directory(info.dir, error)) {
    base::fail("--load ", info.dir, ": no such checkpoint folder");
  }
  // A universal checkpoint (latest_universal) when asked for, or when it is all there is.
  std::optional<std::string> tag = ckpt::read_latest_tag(info.dir);
  const std::optional<std::string> universal_tag =
      ckpt::read_text_file_if_exists(info.dir + "/latest_universal");
  info.universal = universal_tag && (args.universal_checkpoint || !tag);
  if (info.universal) tag = universal_tag;
  if (!tag) {
    base::fail("--load ", info.dir,
               ": no 'latest' (or 'latest_universal') file, so no checkpoint to load");
  }
  info.tag = *tag;
  info.folder = info.dir + "/" + info.tag;
  const io::TorchFile model_states =
      io::TorchFile::open(info.folder + "/" + ckpt::model_states_file_name(0));
  const io::ValueRef saved_args = model_states.root_ref()["args"];
  info.grid = saved_grid(saved_args);
  // The vocabulary stays padded as the run that trained it padded it, whatever grid runs it.
  info.padded_vocab = text::padded_vocab_size(tokenizer.vocab_size(), args.tokenizer, info.grid.tp);
  config::PretrainArgs as_trained = args;
  as_trained.tensor_model_parallel_size = info.grid.tp;
  as_trained.pipeline_model_parallel_size = info.grid.pp;
  ckpt::check_checkpoint_args(saved_args, as_trained, info.padded_vocab, info.folder);
  return info;
}

InferenceModel load_inference_model(const config::PretrainArgs& args, std::int64_t vocab_size,
                                    const CheckpointInfo& checkpoint, const InferenceComms& comms,
                                    const base::Log& log) {
  InferenceModel m;
  m.vocab_size = vocab_size;
  m.checkpoint = checkpoint.folder;
  m.comms = comms;
  m.options = inference_model_options(args, checkpoint.padded_vocab);
  model::GptConfig whole_config = m.options.config;  // T = 1, P = 1
  whole_config.tensor_parallel_size = 1;
  whole_config.tp_rank = 0;
  model::GptConfig& config = m.options.config;
  config.tensor_parallel_size = comms.tp_size;
  config.tp_rank = comms.tp_rank;
  // GPTModelPipe's partition_method, as pretrain cuts the stages (P = 1 keeps the whole model's
  // open spec range).
  if (comms.pp_size > 1) {
    const std::vector<std::int64_t> parts =
        model::pipeline_partition(config, args.bf16 || args.fp16, comms.pp_size,
                                  args.pp_partition_method.value_or("type:transformer"));
    model::set_stage_specs(config, parts, comms.pp_rank);
  }
  model::validate(m.options);
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(config));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);

  const GridSizes& saved = checkpoint.grid;
  log.info(" loading checkpoint from " + checkpoint.dir + " at tag " + checkpoint.tag +
           load_description(checkpoint, comms));
  std::int64_t iteration = 0;
  if (checkpoint.universal) {
    iteration = load_universal_weights(checkpoint, args, *m.params, comms.tp_size, m.vocab_size);
  } else if (saved.tp == comms.tp_size) {
    ckpt::CheckpointRanks ranks;
    ranks.tp = comms.tp_rank;
    ranks.tp_size = saved.tp;
    // The stage's own mp_rank file when the grid is the saved one, else stage 0's (only its
    // counters and args are read).
    ranks.pp = saved.pp == comms.pp_size ? comms.pp_rank : 0;
    ranks.pp_size = saved.pp;
    iteration = load_shard(checkpoint.dir, checkpoint.tag, args, *m.params, ranks);
    // The last stage's copy of the word embedding is in no layer file (checkpoints.md §2.5):
    // the first stage of the same TP rank sends it, as pretrain does on resumption.
    if (comms.pp_size > 1) {
      if (comms.embedding == nullptr) {
        if (comms.first_stage() || comms.last_stage()) {
          base::fail("load_inference_model: no embedding group on the first and last stage");
        }
      } else {
        const std::size_t word =
            m.table->index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
        comms.embedding->broadcast(m.params->view(word), 0);
      }
    }
  } else if (comms.tp_size * comms.pp_size == 1) {
    iteration = load_whole(checkpoint, args, whole_config, *m.params);
  } else {
    const model::ParamTable whole_table = model::ParamTable::build(whole_config);
    const model::ParamBuffer whole(whole_table, tensor::DType::kFloat32);
    iteration = load_whole(checkpoint, args, whole_config, whole);
    model::split_tp_shard(whole, comms.tp_size, *m.params);
  }
  log.info("  successfully loaded checkpoint from " + checkpoint.dir + " at iteration " +
           std::to_string(iteration));
  return m;
}

std::optional<InferenceModel> open_inference_model(InferenceProcesses& processes,
                                                   const config::PretrainArgs& args,
                                                   const text::Tokenizer& tokenizer,
                                                   tensor::Device device, const base::Log& log,
                                                   bool data_parallel) {
  const CheckpointInfo checkpoint = find_checkpoint(args, tokenizer);
  const GridChoice grid =
      choose_inference_grid(processes.world_size(), requested_grid(args), checkpoint.grid, args,
                            checkpoint.padded_vocab, data_parallel);
  if (!grid.error.empty()) {
    if (processes.output_rank()) base::fail(grid.error);
    return std::nullopt;
  }
  const dist::DeviceBackend backend = dist::parse_device_backend(args.distributed_backend);
  processes.join(grid.sizes.tp, grid.sizes.pp, grid.sizes.dp, device, backend);
  if (processes.world_size() > 1 && device.kind == tensor::DeviceKind::kCuda) {
    log.info(std::string(" > device tensors between ranks: ") +
             (backend == dist::DeviceBackend::kNccl
                  ? "NCCL (--distributed-backend nccl)"
                  : "staged through MPI (--distributed-backend gloo)"));
  }
  if (grid.sizes.dp > 1) {
    log.info(" > " + std::to_string(grid.sizes.dp) + " model replicas of " +
             std::to_string(grid.sizes.tp) + " × " + std::to_string(grid.sizes.pp) +
             " ranks split the data");
  }
  InferenceModel model =
      load_inference_model(args, tokenizer.vocab_size(), checkpoint, processes.comms(), log);
  place_on_device(model, device, args.tf32 ? ops::Fp32Matmul::kTf32 : ops::Fp32Matmul::kFp32);
  return model;
}

InferenceModel load_inference_model(const config::PretrainArgs& args,
                                    const text::Tokenizer& tokenizer, const base::Log& log) {
  return load_inference_model(args, tokenizer.vocab_size(), find_checkpoint(args, tokenizer),
                              InferenceComms{}, log);
}

}  // namespace mds::tasks
