#include "ckpt/resume_universal.h"

#include <cstring>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "model/gpt_config.h"

namespace mds::ckpt {

namespace {

std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

// Where a rank keeps one parameter's elements [offset, offset + numel) in a state buffer: the
// table layout, or its ZeRO partitions.
void place(const std::vector<float>& slice, const model::ParamSpec& spec, std::size_t index,
           tensor::Tensor buffer, const train::MixedPrecisionOptimizer& optimizer) {
  float* to = static_cast<float*>(buffer.raw());
  if (!optimizer.partitioned()) {
    std::memcpy(to + spec.offset, slice.data(), slice.size() * sizeof(float));
    return;
  }
  const train::ZeroShard& shard = optimizer.shard();
  const train::ZeroLayout& layout = shard.layout();
  for (std::size_t g = 0; g < layout.size(); ++g) {
    for (const train::ZeroFragment& f :
         layout[g].fragments[static_cast<std::size_t>(shard.rank())]) {
      if (f.param != index) continue;
      std::memcpy(to + shard.group_offset(g) + f.hp_start, slice.data() + f.param_offset,
                  static_cast<std::size_t>(f.numel) * sizeof(float));
    }
  }
}

// A step.pt: the base optimizer's per-group "step" as DeepSpeed's v0.2 converter saves it, a
// Python int or torch's scalar tensor (float32 for torch.optim.Adam).
std::int64_t step_file_value(const std::string& path) {
  const io::TorchFile file = io::TorchFile::open(path);
  const io::ValueRef root = file.root_ref();
  if (root.kind() != io::Value::Kind::kTensor) return root.as_int();
  const io::TensorRef& tensor = root.as_tensor();
  const std::string bytes = file.tensor_bytes(tensor);
  if (tensor.dtype == tensor::DType::kFloat32 && bytes.size() == sizeof(float)) {
    float value;
    std::memcpy(&value, bytes.data(), sizeof value);
    return static_cast<std::int64_t>(value);
  }
  if (tensor.dtype == tensor::DType::kInt64 && bytes.size() == sizeof(std::int64_t)) {
    std::int64_t value;
    std::memcpy(&value, bytes.data(), sizeof value);
    return value;
  }
  base::fail(path, ": expected a step (an int, or a one-element float32 or int64 tensor)");
}

// Adam's step: zero/optimizer_state.pt's param_groups (FusedAdam keeps it there), else the
// step.pt of the parameters' folders (DeepSpeed's v0.2 converter, for optimizers keeping it per
// state); nullopt when neither has it.
std::optional<std::int64_t> saved_adam_step(const std::string& folder,
                                            const model::ParamTable& table) {
  const std::string path = folder + "/zero/optimizer_state.pt";
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    const io::TorchFile file = io::TorchFile::open(path);
    const std::optional<io::ValueRef> step =
        file.root_ref()["param_groups"][std::size_t{0}].get("step");
    if (step) return step->as_int();
  }
  std::optional<std::int64_t> found;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::string step_path = folder + "/zero/" + table[i].engine_name() + "/step.pt";
    if (!std::filesystem::exists(step_path, error)) continue;
    const std::int64_t step = step_file_value(step_path);
    if (found && *found != step) {
      base::fail(step_path, ": step ", step, ", other parameters' step.pt say ", *found);
    }
    found = step;
  }
  return found;
}

}  // namespace

UniversalTensor read_universal_tensor(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    base::fail(path, ": missing from the universal checkpoint");
  }
  const io::TorchFile file = io::TorchFile::open(path);
  file.verify_checksums();
  const io::ValueRef root = file.root_ref();
  const io::TensorRef& param = root["param"].as_tensor();
  if (param.dtype != tensor::DType::kFloat32) {
    base::fail(path, ": param: expected float32, found ", tensor::dtype_name(param.dtype));
  }
  UniversalTensor out;
  out.shape = param.shape;
  const std::string bytes = file.tensor_bytes(param);
  out.values.resize(bytes.size() / sizeof(float));
  std::memcpy(out.values.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<float> universal_slice(const UniversalTensor& full,
                                   const std::vector<std::int64_t>& local_shape,
                                   std::int64_t tp_rank, std::int64_t tp_size, model::TpSplit split,
                                   std::int64_t original_vocab, const std::string& what) {
  if (split == model::TpSplit::kReplicated || tp_size == 1) {
    if (full.shape == local_shape) return full.values;
    if (split == model::TpSplit::kReplicated) {
      base::fail(what, ": shape ", dims_text(full.shape), ", the replicated parameter has ",
                 dims_text(local_shape));
    }
  }
  if (full.shape.size() != local_shape.size() || local_shape.empty()) {
    base::fail(what, ": shape ", dims_text(full.shape), " cannot hold this rank's ",
               dims_text(local_shape));
  }
  UniversalTensor resized = full;
  if (split == model::TpSplit::kVocab) {
    // Rows beyond the new padded size must be padding; missing rows are new padding (zeros).
    const std::int64_t rows = local_shape[0] * tp_size;
    const std::int64_t cols = product(local_shape) / local_shape[0];
    if (rows < original_vocab) {
      base::fail(what, ": ", rows, " vocabulary rows cannot hold the ", original_vocab,
                 " tokens of the vocabulary");
    }
    resized.shape[0] = rows;
    resized.values.resize(static_cast<std::size_t>(rows * cols), 0.0f);
  }
  const std::size_t dim = split == model::TpSplit::kRow ? 1 : 0;
  if (dim >= local_shape.size()) {
    base::fail(what, ": a row-parallel parameter needs two dimensions, has ",
               dims_text(local_shape));
  }
  std::vector<std::int64_t> expected = local_shape;
  expected[dim] *= tp_size;
  if (resized.shape != expected) {
    base::fail(what, ": shape ", dims_text(full.shape), " does not split into ", tp_size,
               " slices of ", dims_text(local_shape), " along dimension ", dim);
  }
  // Row-major: `outer` blocks of `tp_size · local` rows of `inner` elements; this rank owns rows
  // [tp_rank·local, (tp_rank+1)·local) of each block.
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= local_shape[d];
  for (std::size_t d = dim + 1; d < local_shape.size(); ++d) inner *= local_shape[d];
  const std::int64_t local = local_shape[dim];
  std::vector<float> slice;
  slice.reserve(static_cast<std::size_t>(product(local_shape)));
  for (std::int64_t o = 0; o < outer; ++o) {
    const float* block = resized.values.data() + (o * local * tp_size + tp_rank * local) * inner;
    slice.insert(slice.end(), block, block + local * inner);
  }
  return slice;
}

bool load_universal_checkpoint(const std::string& dir, train::Trainer& trainer,
                               const RunDescription& run, const base::Log& log) {
  const std::optional<std::string> tag = read_text_file_if_exists(dir + "/latest_universal");
  if (!tag) {
    log.warn("could not find the metadata file " + dir +
             "/latest_universal; no checkpoint is loaded and training starts from the initial "
             "weights");
    return false;
  }
  const config::PretrainArgs& args = *run.args;
  LoadOptions options;
  options.client_state_only = true;
  options.finetune = args.finetune;
  options.load_optimizer = !args.no_load_optim && !args.finetune;
  options.load_rng = !args.no_load_rng && !args.finetune;
  // A load writes part of the state into the host views; the rest must be the current state.
  trainer.optimizer().copy_state_to_host();
  TrainingState state = trainer_state(trainer, run);
  log.info(" loading universal checkpoint from " + dir + " at tag " + *tag);
  const LoadedCheckpoint loaded = load_deepspeed_checkpoint(dir, *tag, state, options);

  const std::string folder = dir + "/" + *tag;
  train::MixedPrecisionOptimizer& optimizer = trainer.optimizer();
  const model::ParamTable& table = trainer.table();
  const std::int64_t tp_size = run.ranks.tp_size, tp_rank = run.ranks.tp;
  struct Target {
    const char* state;
    tensor::Tensor buffer;
  };
  std::vector<Target> targets = {{"fp32", optimizer.master()}};
  if (options.load_optimizer) {
    targets.push_back({"exp_avg", optimizer.exp_avg()});
    targets.push_back({"exp_avg_sq", optimizer.exp_avg_sq()});
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& spec = table[i];
    const std::vector<std::int64_t> local(spec.local_shape.begin(), spec.local_shape.end());
    for (const Target& target : targets) {
      const std::string path = folder + "/zero/" + spec.engine_name() + "/" + target.state + ".pt";
      const std::vector<float> slice =
          universal_slice(read_universal_tensor(path), local, tp_rank, tp_size, spec.split,
                          run.original_vocab_size, path);
      place(slice, spec, i, target.buffer, optimizer);
    }
  }
  if (options.load_optimizer) {
    if (const std::optional<std::int64_t> step = saved_adam_step(folder, table)) {
      optimizer.set_adam_step(*step);
    } else {
      log.warn(folder +
               " has no Adam step (zero/optimizer_state.pt's param_groups or step.pt files): "
               "Adam's step count restarts (bias correction as after the first step), as "
               "upstream's v0.1 loader does");
    }
    trainer.lr_scheduler().load_state(state.lr_scheduler);
  }
  optimizer.restore_from_checkpoint(train::RestoreSource::kParamsFromMaster);
  if (!args.finetune) restore_progress(state, loaded, args, folder, trainer.progress());
  const train::TrainingProgress& progress = trainer.progress();
  log.info("  successfully loaded universal checkpoint from " + dir + " at iteration " +
           std::to_string(progress.iteration));
  return true;
}

}  // namespace mds::ckpt
