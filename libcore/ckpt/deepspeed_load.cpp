// Reading side of deepspeed_checkpoint.h. Everything is checked and planned first (files stay
// mapped, copies are recorded as byte ranges); the state is written only once all files passed.
#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/deepspeed_objects.h"
#include "ckpt/megatron_rng.h"
#include "io/torch_file.h"
#include "ops/elementwise.h"

namespace mds::ckpt {

using io::Value;
using io::ValueRef;

namespace {

constexpr const char* kRotaryKey = "self_attention.rotary_emb.inv_freq";

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

std::vector<std::int64_t> dims_of(const tensor::Shape& shape) {
  return {shape.begin(), shape.end()};
}

bool is_contiguous(const io::TensorRef& t) {
  return t.strides == io::TensorRef::contiguous_strides(t.shape);
}

class Loader {
 public:
  Loader(std::string folder, TrainingState& state, const LoadOptions& options)
      : folder_(std::move(folder)), state_(state), options_(options), next_(state) {}

  LoadedCheckpoint run() {
    if (options_.client_state_only) {
      load_model_states();
      commit();
      return std::move(loaded_);
    }
    if (options_.load_weights) load_layer_files();
    load_model_states();
    if (has_zero_file(state_.layout) && !options_.weights_only) {
      if (skip_zero_file_) {
        derive_master_ = true;
      } else {
        load_zero_file();
      }
    }
    commit();
    return std::move(loaded_);
  }

 private:
  struct Copy {
    std::string_view from;
    void* to;
  };

  // The opened and CRC-checked file, or null when it is absent and not `required`.
  const io::TorchFile* open(const std::string& name, bool required = true) {
    const std::string path = folder_ + "/" + name;
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      if (!required) return nullptr;
      base::fail(path,
                 ": missing from the checkpoint (written with another precision or ZeRO "
                 "stage, or without its optimizer state?)");
    }
    files_.push_back(std::make_unique<io::TorchFile>(io::TorchFile::open(path)));
    files_.back()->verify_checksums();
    return files_.back().get();
  }

  // The bytes of a tensor after checking its dtype and shape; no copy for contiguous views.
  std::string_view tensor_data(const io::TorchFile& file, const ValueRef& ref, tensor::DType dtype,
                               const std::vector<std::int64_t>& shape) {
    const io::TensorRef& t = ref.as_tensor();
    if (t.dtype != dtype) {
      base::fail(ref.path(), ": expected dtype ", tensor::dtype_name(dtype), ", found ",
                 tensor::dtype_name(t.dtype));
    }
    if (t.shape != shape) {
      base::fail(ref.path(), ": expected shape ", dims_text(shape), ", found ", dims_text(t.shape));
    }
    const std::size_t size = tensor::dtype_size(dtype);
    if (!is_contiguous(t)) {
      scratch_.push_back(file.tensor_bytes(t));
      return scratch_.back();
    }
    return file.storage_bytes(t.storage_key)
        .substr(static_cast<std::size_t>(t.storage_offset) * size,
                static_cast<std::size_t>(t.numel()) * size);
  }

  // A model weight in the buffer's dtype. Without the optimizer state (--finetune,
  // --no-load-optim, evaluate, generate) one saved in another floating-point precision is
  // converted as torch's load_state_dict copies it (round to nearest even), as upstream does; with
  // it the dtypes must match (another precision has other optimizer files, and upstream fails on
  // them).
  std::string_view weight_data(const io::TorchFile& file, const ValueRef& ref, tensor::DType dtype,
                               const std::vector<std::int64_t>& shape) {
    const tensor::DType saved = ref.as_tensor().dtype;
    if (saved == dtype || options_.load_optimizer || !is_floating(saved) || !is_floating(dtype)) {
      return tensor_data(file, ref, dtype, shape);
    }
    const std::string_view bytes = tensor_data(file, ref, saved, shape);
    std::int64_t numel = 1;
    for (const std::int64_t dim : shape) numel *= dim;
    scratch_.emplace_back(static_cast<std::size_t>(numel) * tensor::dtype_size(dtype), '\0');
    ops::cast(tensor::Tensor(scratch_.back().data(), dtype, {numel}),
              tensor::Tensor(const_cast<char*>(bytes.data()), saved, {numel}));
    return scratch_.back();
  }

  static bool is_floating(tensor::DType dtype) {
    return dtype == tensor::DType::kFloat32 || dtype == tensor::DType::kBFloat16 ||
           dtype == tensor::DType::kFloat16;
  }

  char* param_address(const tensor::Tensor& flat, const model::ParamSpec& param) const {
    return static_cast<char*>(flat.raw()) +
           static_cast<std::size_t>(param.offset) * tensor::dtype_size(flat.dtype());
  }

  // A packed fp32 group (parameters back to back) scattered into a table-layout buffer.
  void plan_unpack(std::string_view packed, const OptimizerGroup& group,
                   const tensor::Tensor& flat) {
    std::size_t at = 0;
    for (const std::size_t i : group.params) {
      const model::ParamSpec& param = table()[i];
      const std::size_t n = static_cast<std::size_t>(param.local_numel()) * sizeof(float);
      copies_.push_back({packed.substr(at, n), param_address(flat, param)});
      at += n;
    }
  }

  const model::ParamTable& table() const { return *state_.table; }

  // --- layer files ----------------------------------------------------------------------

  void load_layer_files() {
    for (const std::int64_t layer : table().saved_layers()) {
      const std::string name = model::layer_file_name(layer, state_.ranks.tp);
      const io::TorchFile& file = *open(name);
      base::within_file(file.name(), [&] { load_layer_file(file, layer); });
    }
  }

  void load_layer_file(const io::TorchFile& file, std::int64_t layer) {
    const ValueRef root = file.root_ref();
    root.dict_size();
    std::set<std::string> expected;
    const tensor::DType dtype = state_.params.dtype();
    for (const model::ParamSpec& param : table().params()) {
      if (param.layer != layer || param.tied_replica) continue;
      expected.insert(param.name);
      copies_.push_back({weight_data(file, root[param.name], dtype, dims_of(param.local_shape)),
                         param_address(state_.params, param)});
    }
    if (state_.rotary_head_dim > 0 && expected.count("self_attention.dense.bias")) {
      expected.insert(kRotaryKey);
      tensor_data(file, root[kRotaryKey], dtype, {state_.rotary_head_dim / 2});  // derived
    }
    for (const Value& key : root.value().keys()) {
      if (!key.is(Value::Kind::kString) || !expected.count(key.as_string())) {
        base::fail("unexpected key ",
                   key.is(Value::Kind::kString) ? "'" + key.as_string() + "'" : "(not a str)",
                   " (a different model configuration?)");
      }
    }
  }

  // --- mp_rank_XX_model_states.pt ---------------------------------------------------------

  void load_model_states() {
    const io::TorchFile& file = *open(model_states_file_name(model_states_rank()));
    base::within_file(file.name(), [&] { load_model_states(file); });
  }

  // A universal checkpoint written on another grid has no file of this rank: all read rank 0's.
  std::int64_t model_states_rank() const {
    if (!options_.client_state_only) return state_.ranks.mp_rank();
    std::int64_t files = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(folder_, error)) {
      if (entry.path().filename().string().rfind("mp_rank_", 0) == 0) ++files;
    }
    return files == state_.ranks.mp_size() ? state_.ranks.mp_rank() : 0;
  }

  // Counters, LR scheduler, args and RNG check: what Megatron takes back as client state.
  void load_client_state(const ValueRef& root) {
    const double version = root["checkpoint_version"].as_float();
    // Versions 0 and 1 order the fused QKV rows differently (checkpoints.md §1.3).
    if (version != 2.0 && version != 3.0) {
      base::fail("checkpoint_version ", version, " is not supported (QKV layout of 2.0/3.0 only)");
    }
    next_.global_steps = read_integer(root["global_steps"]);
    next_.skipped_steps = read_integer(root["skipped_steps"]);
    next_.global_samples = read_integer(root["global_samples"]);
    next_.lr_scheduler = read_lr_scheduler_dict(root["lr_scheduler"]);

    const ValueRef args = root["args"];
    if (!args.value().is(Value::Kind::kObject) ||
        args.value().qualified_name() != "argparse.Namespace") {
      args.fail_expected("an argparse.Namespace");
    }
    const ValueRef fields = args.object_state();
    const auto counter = [&](std::string_view name) -> std::int64_t {
      const auto found = fields.get(name);
      return found ? read_integer(*found) : 0;  // Megatron: getattr(args, name, 0)
    };
    next_.consumed_train_samples = counter("consumed_train_samples");
    next_.consumed_valid_samples = counter("consumed_valid_samples");
    const std::int64_t iteration = read_integer(root["iteration"]);
    const auto tokens = root.get("tokens");
    if (!options_.finetune) {
      next_.iteration = iteration;
      if (tokens) next_.consumed_train_tokens = read_integer(*tokens);
    } else {
      next_.iteration = 0;
    }
    if (options_.load_rng && !options_.finetune) check_megatron_rng_states(root);
    loaded_.args = args.value();
    loaded_.ds_config = root["ds_config"].value();
    if (const auto v = root.get("ds_version")) loaded_.ds_version = v->as_string();
  }

  void load_model_states(const io::TorchFile& file) {
    const ValueRef root = file.root_ref();
    if (options_.client_state_only) {
      load_client_state(root);
      return;
    }
    // Another model-parallel grid needs a universal checkpoint; ZeRO files are partitioned
    // over the data-parallel ranks that wrote them.
    const std::int64_t mp_size = root["mp_world_size"].as_int();
    if (mp_size != state_.ranks.mp_size()) {
      base::fail("mp_world_size is ", mp_size, " but this run has ", state_.ranks.mp_size(),
                 " model-parallel ranks (TP × PP); resuming on another grid needs a universal "
                 "checkpoint");
    }
    // Without the optimizer state (--finetune, --no-load-optim) the ZeRO files of another DP
    // size are not needed: the fp32 masters are re-derived from the 16-bit weights.
    const std::int64_t dp_size = root["dp_world_size"].as_int();
    if (has_zero_file(state_.layout) && !options_.weights_only && dp_size != state_.ranks.dp_size) {
      if (options_.load_optimizer) {
        base::fail("dp_world_size is ", dp_size, " but this run has ", state_.ranks.dp_size,
                   " data-parallel ranks; the ZeRO partitions need the same count");
      }
      skip_zero_file_ = true;
    }
    load_client_state(root);

    const ValueRef optimizer = root["optimizer"];
    if (state_.layout == OptimizerLayout::kFp32 && options_.load_optimizer) {
      if (optimizer.is_none()) fail_no_optimizer();
      load_per_param_adam(file, optimizer);
    } else if (state_.layout == OptimizerLayout::kFp16 && !options_.weights_only) {
      if (options_.load_optimizer) {
        if (optimizer.is_none()) fail_no_optimizer();
        load_fp16_optimizer(file, optimizer);
      } else {
        derive_master_ = true;
      }
    }
    // param_shapes describe the optimizer's flat groups of this rank's stage: a weights-only
    // load (whole model, any stage split) or one without the optimizer state does not use them.
    if (has_zero_file(state_.layout) && options_.load_optimizer && !options_.weights_only) {
      check_param_shapes(root["param_shapes"]);
    }
  }

  [[noreturn]] void fail_no_optimizer() const {
    base::fail("optimizer: none saved (load with --no-load-optim)");
  }

  void load_per_param_adam(const io::TorchFile& file, const ValueRef& optimizer) {
    const ValueRef state = optimizer["state"];
    const ValueRef param_groups = optimizer["param_groups"];
    if (param_groups.list_size() != groups_.size()) {
      base::fail(param_groups.path(), ": ", param_groups.list_size(), " groups, expected ",
                 groups_.size());
    }
    std::int64_t k = 0;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      std::vector<std::int64_t> ids;
      for (const std::size_t i : groups_[g].params) {
        const model::ParamSpec& param = table()[i];
        const ValueRef moments = state.at_int_key(k);
        for (const auto& [key, flat] :
             {std::pair{"exp_avg", &state_.exp_avg}, std::pair{"exp_avg_sq", &state_.exp_avg_sq}}) {
          copies_.push_back(
              {tensor_data(file, moments[key], tensor::DType::kFloat32, dims_of(param.local_shape)),
               param_address(*flat, param)});
        }
        ids.push_back(k++);
      }
      read_group(param_groups[g], groups_[g], ids);
    }
    if (state.dict_size() != static_cast<std::size_t>(k)) {
      base::fail(state.path(), ": ", state.dict_size(), " entries, expected ", k);
    }
  }

  // Hyperparameters come from the groups; every group must agree on the step.
  void read_group(const ValueRef& ref, const OptimizerGroup& group,
                  const std::vector<std::int64_t>& ids) {
    std::int64_t step = 0;
    read_adam_param_group(ref, group.decay(), ids, next_.adam, step);
    if (!step_seen_) {
      next_.adam_step = step;
      step_seen_ = true;
    } else if (step != next_.adam_step) {
      base::fail(ref.path(), ".step: ", step, " differs from the first group's ", next_.adam_step);
    }
  }

  // apex FusedAdam over one flat tensor per group; group g's moments hold `length(g)` elements,
  // which `place(bytes, g, buffer)` plans to copy into the state's buffer.
  template <typename Length, typename Place>
  void load_flat_adam(const io::TorchFile& file, const ValueRef& base, Length length, Place place) {
    const ValueRef state = base["state"];
    const ValueRef param_groups = base["param_groups"];
    if (param_groups.list_size() != groups_.size() || state.dict_size() != groups_.size()) {
      base::fail(base.path(), ": ", param_groups.list_size(), " param groups and ",
                 state.dict_size(), " states, expected ", groups_.size());
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const auto index = static_cast<std::int64_t>(g);
      const ValueRef moments = state.at_int_key(index);
      for (const auto& [key, flat] :
           {std::pair{"exp_avg", &state_.exp_avg}, std::pair{"exp_avg_sq", &state_.exp_avg_sq}}) {
        place(tensor_data(file, moments[key], tensor::DType::kFloat32, {length(g)}), g, *flat);
      }
      read_group(param_groups[g], groups_[g], {index});
    }
  }

  // A list of fp32 master groups, each `length(g)` long, of which the first numel count.
  template <typename Length>
  void load_masters(const io::TorchFile& file, const ValueRef& list, Length length) {
    if (list.list_size() != groups_.size()) {
      base::fail(list.path(), ": ", list.list_size(), " groups, expected ", groups_.size());
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      plan_unpack(tensor_data(file, list[g], tensor::DType::kFloat32, {length(groups_[g])}),
                  groups_[g], state_.master);
    }
  }

  void load_fp16_optimizer(const io::TorchFile& file, const ValueRef& optimizer) {
    train::LossScalerState& scaler = next_.loss_scaler;
    scaler.dynamic = optimizer["dynamic_loss_scale"].as_bool();
    scaler.cur_scale = optimizer["cur_scale"].as_float();
    scaler.cur_iter = read_integer(optimizer["cur_iter"]);
    if (scaler.dynamic) {
      scaler.last_overflow_iter = read_integer(optimizer["last_overflow_iter"]);
      scaler.scale_factor = optimizer["scale_factor"].as_float();
      scaler.scale_window = read_integer(optimizer["scale_window"]);
    }
    const auto unpadded = [](const OptimizerGroup& g) { return g.numel; };
    load_flat_adam(
        file, optimizer["optimizer_state_dict"], [this](std::size_t g) { return groups_[g].numel; },
        [this](std::string_view bytes, std::size_t g, const tensor::Tensor& flat) {
          plan_unpack(bytes, groups_[g], flat);
        });
    load_masters(file, optimizer["fp32_groups_flat"], unpadded);
    next_.clip_grad = optimizer["clip_grad"].as_float();
  }

  void check_param_shapes(const ValueRef& list) {
    if (list.list_size() != groups_.size()) {
      base::fail(list.path(), ": ", list.list_size(), " groups, expected ", groups_.size());
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const ValueRef shapes = list[g];
      if (shapes.dict_size() != groups_[g].params.size()) {
        base::fail(shapes.path(), ": ", shapes.dict_size(), " parameters, expected ",
                   groups_[g].params.size());
      }
      for (std::size_t j = 0; j < groups_[g].params.size(); ++j) {
        const model::ParamSpec& param = table()[groups_[g].params[j]];
        const Value& key = shapes.value().keys()[j];
        if (!key.is(Value::Kind::kString) || key.as_string() != param.engine_name()) {
          base::fail(shapes.path(), ": parameter ", j, " is not ", param.engine_name());
        }
        const ValueRef size = shapes[param.engine_name()];
        const tensor::Shape found = read_torch_size(size);
        if (!(found == param.local_shape)) {
          base::fail(size.path(), ": expected shape ", param.local_shape.to_string(), ", found ",
                     found.to_string());
        }
      }
    }
  }

  // --- zero_pp_rank / bf16_zero_pp_rank file ----------------------------------------------

  void load_zero_file() {
    // DeepSpeed restores the fp32 masters from this file even without the optimizer state
    // (load_from_fp32_weights); without the file they are re-derived from the 16-bit weights.
    const io::TorchFile* file = open(zero_file_to_read(), options_.load_optimizer);
    if (file == nullptr) {
      derive_master_ = true;
      return;
    }
    base::within_file(file->name(),
                      [&] { load_zero_state(*file, file->root_ref()["optimizer_state_dict"]); });
  }

  // This rank's ZeRO file. As DeepSpeed's engine, when none carries the prefix of the run's
  // precision ("bf16_" for bf16, none otherwise) the other naming is taken with a warning: the
  // files deepspeed_to_deepspeed.py writes for a bf16 run have no prefix.
  std::string zero_file_to_read() {
    const std::string name = zero_file_name(state_.layout, state_.ranks.dp, state_.ranks.mp_rank());
    const bool bf16 = state_.layout == OptimizerLayout::kBf16;
    const std::string other = bf16 ? name.substr(5) : "bf16_" + name;
    std::error_code error;
    if (std::filesystem::exists(folder_ + "/" + name, error) ||
        !std::filesystem::exists(folder_ + "/" + other, error)) {
      return name;
    }
    loaded_.warnings.push_back(std::string("Loading ") + (bf16 ? "fp16" : "bf16") +
                               " zero checkpoints into " + (bf16 ? "bf16" : "fp16") +
                               " training engine (" + folder_ + "/" + other + ")");
    return other;
  }

  // Group g's partition inside one of the state's partitioned buffers.
  char* partition_address(const tensor::Tensor& partitions, std::size_t g) const {
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < g; ++k) offset += zero()[k].partition_numel;
    return static_cast<char*>(partitions.raw()) + static_cast<std::size_t>(offset) * sizeof(float);
  }

  const train::ZeroLayout& zero() const { return *state_.zero; }

  void load_zero_state(const io::TorchFile& file, const ValueRef& sd) {
    const bool zero_optimizer = is_zero_optimizer(state_.layout);
    const std::int64_t rank = state_.ranks.dp;
    const std::size_t groups = zero().size();
    const std::string paddings_key = sd.get("group_paddings") ? "group_paddings" : "groups_padding";
    const ValueRef paddings = sd[paddings_key];
    const ValueRef counts = sd["partition_count"];
    if (paddings.list_size() != groups || counts.list_size() != groups) {
      base::fail(paddings.path(), ": ", paddings.list_size(), " groups, expected ", groups);
    }
    for (std::size_t g = 0; g < groups; ++g) {
      if (counts[g].as_int() != zero().dp_size()) {
        base::fail(counts[g].path(), ": written by ", counts[g].as_int(),
                   " data-parallel ranks, this run has ", zero().dp_size());
      }
      if (paddings[g].as_int() != zero()[g].group_padding(rank)) {
        base::fail(paddings[g].path(), ": ", paddings[g].as_int(), ", expected ",
                   zero()[g].group_padding(rank));
      }
    }
    if (const auto mappings = sd.get("param_slice_mappings")) check_slice_mappings(*mappings);
    // ZeRO drops the last rank's padding from its partitions; BF16_Optimizer keeps it.
    const ValueRef masters = sd["single_partition_of_fp32_groups"];
    if (masters.list_size() != groups) {
      base::fail(masters.path(), ": ", masters.list_size(), " groups, expected ", groups);
    }
    for (std::size_t g = 0; g < groups; ++g) {
      const train::ZeroGroup& group = zero()[g];
      const std::int64_t kept =
          zero_optimizer
              ? std::max<std::int64_t>(group.partition_numel - group.group_padding(rank), 0)
              : group.partition_numel;
      copies_.push_back({tensor_data(file, masters[g], tensor::DType::kFloat32, {kept}),
                         partition_address(state_.master, g)});
    }
    if (zero_optimizer) {
      read_loss_scaler_object(sd["loss_scaler"], next_.loss_scaler);
      const std::int64_t stage = read_zero_stage(sd["zero_stage"]);
      if (stage != 1 && stage != 2) base::fail("zero_stage: ", stage, " is not ZeRO 1 or 2");
    }
    next_.clip_grad = sd["clip_grad"].as_float();
    if (!options_.load_optimizer) return;
    const ValueRef base = sd["base_optimizer_state"];
    if (!base.value().is_dict_like()) {
      base.fail_expected("a rigid state dict (elastic_checkpoint files are not supported)");
    }
    load_partitioned_adam(file, base);
  }

  // apex FusedAdam over this rank's flat partitions: one tensor per group.
  void load_partitioned_adam(const io::TorchFile& file, const ValueRef& base) {
    load_flat_adam(
        file, base, [this](std::size_t g) { return zero()[g].partition_numel; },
        [this](std::string_view bytes, std::size_t g, const tensor::Tensor& flat) {
          copies_.push_back({bytes, partition_address(flat, g)});
        });
  }

  static std::int64_t read_zero_stage(const ValueRef& ref) {
    const Value& v = ref.value();
    if (v.is(Value::Kind::kInt)) return v.as_int();
    if (v.is(Value::Kind::kObject)) {
      const std::vector<Value>& args = v.args();
      // Python < 3.11 pickles ZeroStageEnum(1); newer ones getattr(ZeroStageEnum, "name").
      if (v.name() == "ZeroStageEnum" && args.size() == 1 && args[0].is(Value::Kind::kInt)) {
        return args[0].as_int();
      }
      if (v.name() == "getattr" && args.size() == 2 && args[0].is(Value::Kind::kGlobal) &&
          args[0].name() == "ZeroStageEnum" && args[1].is(Value::Kind::kString)) {
        if (args[1].as_string() == "optimizer_states") return 1;
        if (args[1].as_string() == "gradients") return 2;
      }
    }
    ref.fail_expected("a ZeroStageEnum of stage 1 or 2");
  }

  void check_slice_mappings(const ValueRef& list) {
    if (list.list_size() != zero().size()) {
      base::fail(list.path(), ": ", list.list_size(), " groups, expected ", zero().size());
    }
    for (std::size_t g = 0; g < zero().size(); ++g) {
      const std::vector<train::ZeroFragment>& fragments =
          zero()[g].fragments[static_cast<std::size_t>(state_.ranks.dp)];
      if (list[g].dict_size() != fragments.size()) {
        base::fail(list[g].path(), ": ", list[g].dict_size(), " fragments, expected ",
                   fragments.size());
      }
      for (const train::ZeroFragment& fragment : fragments) {
        std::int64_t numel = 0;
        std::int64_t found_start = 0;
        const ValueRef address = list[g][table()[fragment.param].engine_name()];
        read_fragment_address(address, numel, found_start);
        if (numel != fragment.numel || found_start != fragment.hp_start) {
          base::fail(address.path(), ": fragment (numel ", numel, ", start ", found_start,
                     "), expected (", fragment.numel, ", ", fragment.hp_start, ")");
        }
      }
    }
  }

  // --- commit ---------------------------------------------------------------------------

  void commit() {
    for (const Copy& copy : copies_) std::memcpy(copy.to, copy.from.data(), copy.from.size());
    if (derive_master_) upcast_params_to_master();
    TrainingState& s = state_;
    s.iteration = next_.iteration;
    s.global_steps = next_.global_steps;
    s.global_samples = next_.global_samples;
    s.skipped_steps = next_.skipped_steps;
    s.consumed_train_samples = next_.consumed_train_samples;
    s.consumed_valid_samples = next_.consumed_valid_samples;
    s.consumed_train_tokens = next_.consumed_train_tokens;
    s.lr_scheduler = next_.lr_scheduler;
    s.clip_grad = next_.clip_grad;
    s.loss_scaler = next_.loss_scaler;
    if (options_.load_optimizer) {
      s.adam = next_.adam;
      s.adam_step = next_.adam_step;
    }
  }

  void upcast_params_to_master() {
    if (has_zero_file(state_.layout)) {
      for (std::size_t g = 0; g < zero().size(); ++g) {
        train::gather_partition(
            state_.params, zero(), g, state_.ranks.dp,
            tensor::Tensor(partition_address(state_.master, g), tensor::DType::kFloat32,
                           tensor::Shape{zero()[g].partition_numel}));
      }
      return;
    }
    float* master = static_cast<float*>(state_.master.raw());
    const std::int64_t n = state_.params.numel();
    if (state_.params.dtype() == tensor::DType::kBFloat16) {
      const auto* p = static_cast<const tensor::BFloat16*>(state_.params.raw());
      for (std::int64_t i = 0; i < n; ++i) master[i] = tensor::to_float(p[i]);
    } else {
      const auto* p = static_cast<const tensor::Float16*>(state_.params.raw());
      for (std::int64_t i = 0; i < n; ++i) master[i] = tensor::to_float(p[i]);
    }
  }

  std::string folder_;
  TrainingState& state_;
  LoadOptions options_;
  TrainingState next_;  // scalars as they will be after commit (buffers are state_'s)
  std::vector<OptimizerGroup> groups_ = optimizer_groups(*state_.table);
  std::vector<std::unique_ptr<io::TorchFile>> files_;
  std::deque<std::string> scratch_;  // copies of non-contiguous tensors
  std::vector<Copy> copies_;
  bool derive_master_ = false;
  bool skip_zero_file_ = false;
  bool step_seen_ = false;
  LoadedCheckpoint loaded_;
};

}  // namespace

LoadedCheckpoint load_deepspeed_checkpoint(const std::string& dir, const std::string& tag,
                                           TrainingState& state, const LoadOptions& options) {
  check_state_buffers(state, !options.weights_only, options.load_optimizer && !options.weights_only,
                      "loading checkpoint");
  if (tag.empty() || tag.find('/') != std::string::npos || tag == "." || tag == "..") {
    base::fail(dir, "/latest: '", tag, "' is not a checkpoint tag");
  }
  const std::string folder = dir + "/" + tag;
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    base::fail(folder, ": no such checkpoint folder");
  }
  return Loader(folder, state, options).run();
}

}  // namespace mds::ckpt
