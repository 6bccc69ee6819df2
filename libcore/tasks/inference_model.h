// A GPT model for inference: the shape the command line describes (as upstream, the model flags
// must match the checkpoint) with the weights of the checkpoint in --load, as fp32 — the whole
// model on one process, or this rank's TP shard of its pipeline stage in a T × P grid.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/log.h"
#include "config/pretrain_args.h"
#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tasks/inference_comms.h"
#include "tasks/inference_grid.h"
#include "text/tokenizer.h"

namespace mds::tasks {

struct InferenceModel {
  // Dropout 0, no recomputation; config.tensor_parallel_size / tp_rank and the stage's spec
  // range say which share of the model this rank holds.
  model::ModelOptions options;
  std::unique_ptr<model::ParamTable> table;
  std::unique_ptr<model::ParamBuffer> params;  // fp32 (16-bit checkpoints are widened)
  // Where the model runs (tasks/inference_device.h): null for the host, else a CUDA device's
  // context, with params there.
  std::unique_ptr<ops::DeviceContext> device;
  std::int64_t vocab_size = 0;  // the tokenizer's, before padding
  std::string checkpoint;       // <load>/<tag>
  InferenceComms comms;         // the groups of the grid (default: one process)
};

// The model options of validated args (tasks::validate_inference_args) and a padded vocabulary.
model::ModelOptions inference_model_options(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab);

// Where the checkpoint in --load is and what it was trained with.
struct CheckpointInfo {
  std::string dir;     // --load
  std::string tag;     // from `latest` (or `latest_universal`)
  std::string folder;  // dir/tag
  bool universal = false;
  GridSizes grid;                 // the TP and PP sizes of the run that wrote it
  std::int64_t padded_vocab = 0;  // the vocabulary padded as that run padded it
};

// Reads <args.load>/latest (a universal checkpoint's latest_universal with
// --universal-checkpoint, or when it is all there is) and the saved args of the checkpoint it
// names, which must describe the model of the command line. A missing folder or `latest` file,
// or a mismatch, fails with one line naming it.
CheckpointInfo find_checkpoint(const config::PretrainArgs& args, const text::Tokenizer& tokenizer);

// Loads this rank's share of the model for the grid of `comms` (weights only: no optimizer
// state, no RNG). A checkpoint saved at the same TP size is read file by file: each rank reads
// its TP rank's layer files of its own stage (the last stage receives the tied word embedding
// from the first); one of another TP size is merged whole and cut to this rank; a universal one
// gives each rank its slices. A missing file or tensor fails with one line naming it.
// `vocab_size` is the tokenizer's (before padding).
InferenceModel load_inference_model(const config::PretrainArgs& args, std::int64_t vocab_size,
                                    const CheckpointInfo& checkpoint, const InferenceComms& comms,
                                    const base::Log& log);

// find_checkpoint, the grid for the launcher's ranks (choose_inference_grid; `data_parallel`: W
// may hold several replicas), joining them with groups for `device` (this rank's, from
// choose_inference_device; on a CUDA device the --distributed-backend of `args` moves the device
// tensors), and this rank's share of the model, loaded on the host and placed on `device`. A grid
// that does not fit fails on rank 0 with one line; every other rank gets nullopt and should exit
// 0, so that the launcher (which stops the job at the first non-zero exit) lets rank 0 print that
// line.
std::optional<InferenceModel> open_inference_model(InferenceProcesses& processes,
                                                   const config::PretrainArgs& args,
                                                   const text::Tokenizer& tokenizer,
                                                   tensor::Device device, const base::Log& log,
                                                   bool data_parallel = false);

// One process: find_checkpoint, then the whole model.
InferenceModel load_inference_model(const config::PretrainArgs& args,
                                    const text::Tokenizer& tokenizer, const base::Log& log);

}  // namespace mds::tasks
