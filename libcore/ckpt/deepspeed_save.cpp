// Writing side of deepspeed_checkpoint.h. Dict keys are set in the order upstream's dicts get
// them, so that the files list like upstream's (checkpoints.md §2.2-§2.6).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/deepspeed_objects.h"
#include "ckpt/megatron_rng.h"
#include "ckpt/pt_builder.h"

namespace mds::ckpt {

using io::Value;

namespace {

constexpr const char* kRotaryKey = "self_attention.rotary_emb.inv_freq";
constexpr double kCheckpointVersion = 3.0;

std::vector<std::int64_t> dims_of(const tensor::Shape& shape) {
  return {shape.begin(), shape.end()};
}

// The bytes of parameter `index` in a table-layout buffer.
std::string_view param_bytes(const tensor::Tensor& flat, const model::ParamSpec& param) {
  const std::size_t size = tensor::dtype_size(flat.dtype());
  return {static_cast<const char*>(flat.raw()) + static_cast<std::size_t>(param.offset) * size,
          static_cast<std::size_t>(param.local_numel()) * size};
}

// RotaryEmbedding's buffer 1 / 10000^(2i/hn), computed in fp32 as torch does and stored in the
// params dtype (DeepSpeed casts the whole module, buffers included).
std::string rotary_inv_freq(std::int64_t head_dim, tensor::DType dtype) {
  std::string bytes;
  for (std::int64_t i = 0; i < head_dim; i += 2) {
    const float value =
        1.0f / std::pow(10000.0f, static_cast<float>(i) / static_cast<float>(head_dim));
    if (dtype == tensor::DType::kFloat32) {
      bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
    } else {
      const std::uint16_t bits = dtype == tensor::DType::kBFloat16 ? tensor::to_bfloat16(value).bits
                                                                   : tensor::to_float16(value).bits;
      bytes.append(reinterpret_cast<const char*>(&bits), sizeof bits);
    }
  }
  return bytes;
}

bool is_transformer_layer(const model::ParamTable& table, std::int64_t layer) {
  return table.find(layer, "self_attention.dense.bias").has_value();
}

void write_layer_files(const StagedFolder& folder, const TrainingState& s,
                       const SaveOptions& options) {
  const model::ParamTable& table = *s.table;
  for (const std::int64_t layer : table.saved_layers()) {
    PtBuilder builder(options.storage_location);
    // PipelineModule saves type(state_dict)({k: v.clone()}): an OrderedDict without _metadata.
    Value root = Value::ordered_dict();
    for (const model::ParamSpec& param : table.params()) {
      if (param.layer != layer || param.tied_replica) continue;
      root.set(param.name, builder.view(param_bytes(s.params, param), s.params.dtype(),
                                        dims_of(param.local_shape)));
      if (s.rotary_head_dim > 0 && param.name == "self_attention.dense.bias") {
        root.set(kRotaryKey, builder.own(rotary_inv_freq(s.rotary_head_dim, s.params.dtype()),
                                         s.params.dtype(), {s.rotary_head_dim / 2}));
      }
    }
    builder.write(folder.file(model::layer_file_name(layer, s.ranks.tp)), root);
  }
}

Value buffer_names(const TrainingState& s) {
  Value names = Value::list();
  if (s.rotary_head_dim <= 0) return names;
  for (const std::int64_t layer : s.table->saved_layers()) {
    if (is_transformer_layer(*s.table, layer)) {
      names.push(Value::string(std::to_string(layer) + "." + kRotaryKey));
    }
  }
  return names;
}

// Each group's fp32 values packed back to back, zero-padded to `padded` elements (≥ numel).
std::string packed_group(const TrainingState& s, const tensor::Tensor& flat,
                         const OptimizerGroup& group, std::int64_t padded) {
  std::string bytes(static_cast<std::size_t>(padded) * sizeof(float), '\0');
  pack_group(*s.table, group, static_cast<const float*>(flat.raw()),
             reinterpret_cast<float*>(bytes.data()));
  return bytes;
}

// apex FusedAdam state_dict() over one flat fp32 tensor per group (FP16_Optimizer, ZeRO,
// BF16_Optimizer): state key g = group index; moments `padded(g)` elements long.
template <typename Padded>
Value flat_adam_state(const TrainingState& s, const std::vector<OptimizerGroup>& groups,
                      Padded padded, PtBuilder& builder) {
  Value state = Value::dict();
  Value param_groups = Value::list();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::int64_t n = padded(groups[g]);
    Value moments = Value::dict();
    moments.set("exp_avg", builder.own(packed_group(s, s.exp_avg, groups[g], n),
                                       tensor::DType::kFloat32, {n}));
    moments.set("exp_avg_sq", builder.own(packed_group(s, s.exp_avg_sq, groups[g], n),
                                          tensor::DType::kFloat32, {n}));
    state.set(Value::integer(static_cast<std::int64_t>(g)), std::move(moments));
    param_groups.push(
        adam_param_group(s.adam, groups[g].decay(), s.adam_step, {static_cast<std::int64_t>(g)}));
  }
  Value dict = Value::dict();
  dict.set("state", std::move(state));
  dict.set("param_groups", std::move(param_groups));
  return dict;
}

// The base optimizer itself (fp32, no wrapper): one state entry per parameter, numbered across
// groups.
Value per_param_adam_state(const TrainingState& s, const std::vector<OptimizerGroup>& groups,
                           PtBuilder& builder) {
  Value state = Value::dict();
  Value param_groups = Value::list();
  std::int64_t k = 0;
  for (const OptimizerGroup& group : groups) {
    std::vector<std::int64_t> ids;
    for (const std::size_t i : group.params) {
      const model::ParamSpec& param = (*s.table)[i];
      Value moments = Value::dict();
      moments.set("exp_avg", builder.view(param_bytes(s.exp_avg, param), tensor::DType::kFloat32,
                                          dims_of(param.local_shape)));
      moments.set("exp_avg_sq", builder.view(param_bytes(s.exp_avg_sq, param),
                                             tensor::DType::kFloat32, dims_of(param.local_shape)));
      state.set(Value::integer(k), std::move(moments));
      ids.push_back(k++);
    }
    param_groups.push(adam_param_group(s.adam, group.decay(), s.adam_step, ids));
  }
  Value dict = Value::dict();
  dict.set("state", std::move(state));
  dict.set("param_groups", std::move(param_groups));
  return dict;
}

// FP16_Optimizer.state_dict() (fp16, ZeRO 0).
Value fp16_optimizer_state(const TrainingState& s, const std::vector<OptimizerGroup>& groups,
                           PtBuilder& builder) {
  const train::LossScalerState& scaler = s.loss_scaler;
  Value dict = Value::dict();
  dict.set("dynamic_loss_scale", Value::boolean(scaler.dynamic));
  dict.set("cur_scale", Value::real(scaler.cur_scale));
  dict.set("cur_iter", Value::integer(scaler.cur_iter));
  if (scaler.dynamic) {
    dict.set("last_overflow_iter", Value::integer(scaler.last_overflow_iter));
    dict.set("scale_factor", Value::real(scaler.scale_factor));
    dict.set("scale_window", Value::integer(scaler.scale_window));
  }
  const auto unpadded = [](const OptimizerGroup& g) { return g.numel; };
  dict.set("optimizer_state_dict", flat_adam_state(s, groups, unpadded, builder));
  Value flats = Value::list();
  for (const OptimizerGroup& group : groups) {
    flats.push(builder.own(packed_group(s, s.master, group, group.numel), tensor::DType::kFloat32,
                           {group.numel}, true));
  }
  dict.set("fp32_groups_flat", std::move(flats));
  dict.set("clip_grad", Value::real(s.clip_grad));
  return dict;
}

Value param_shapes(const TrainingState& s, const std::vector<OptimizerGroup>& groups) {
  Value list = Value::list();
  for (const OptimizerGroup& group : groups) {
    Value shapes = Value::ordered_dict();
    for (const std::size_t i : group.params) {
      shapes.set((*s.table)[i].engine_name(), torch_size((*s.table)[i].local_shape));
    }
    list.push(std::move(shapes));
  }
  return list;
}

// The bytes of group g's partition in one of the partitioned state buffers.
std::string_view partition_bytes(const TrainingState& s, const tensor::Tensor& partitions,
                                 std::size_t g) {
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < g; ++k) offset += (*s.zero)[k].partition_numel;
  return {
      static_cast<const char*>(partitions.raw()) + static_cast<std::size_t>(offset) * sizeof(float),
      static_cast<std::size_t>((*s.zero)[g].partition_numel) * sizeof(float)};
}

// apex FusedAdam's state_dict() over this rank's flat fp32 partitions (ZeRO, BF16_Optimizer).
Value partitioned_adam_state(const TrainingState& s, PtBuilder& builder) {
  Value state = Value::dict();
  Value param_groups = Value::list();
  for (std::size_t g = 0; g < s.zero->size(); ++g) {
    const train::ZeroGroup& group = (*s.zero)[g];
    Value moments = Value::dict();
    moments.set("exp_avg", builder.view(partition_bytes(s, s.exp_avg, g), tensor::DType::kFloat32,
                                        {group.partition_numel}));
    moments.set("exp_avg_sq", builder.view(partition_bytes(s, s.exp_avg_sq, g),
                                           tensor::DType::kFloat32, {group.partition_numel}));
    state.set(Value::integer(static_cast<std::int64_t>(g)), std::move(moments));
    param_groups.push(adam_param_group(s.adam, group.decay_group != model::DecayGroup::kNoDecay,
                                       s.adam_step, {static_cast<std::int64_t>(g)}));
  }
  Value dict = Value::dict();
  dict.set("state", std::move(state));
  dict.set("param_groups", std::move(param_groups));
  return dict;
}

// name → fragment_address(numel, start inside the partition) for this DP rank's fragments.
Value slice_mappings(const TrainingState& s) {
  Value list = Value::list();
  for (const train::ZeroGroup& group : s.zero->groups()) {
    Value mapping = Value::ordered_dict();
    for (const train::ZeroFragment& fragment :
         group.fragments[static_cast<std::size_t>(s.ranks.dp)]) {
      mapping.set((*s.table)[fragment.param].engine_name(),
                  fragment_address(fragment.numel, fragment.hp_start));
    }
    list.push(std::move(mapping));
  }
  return list;
}

// DeepSpeedZeroOptimizer (ZeRO 1/2) or BF16_Optimizer state_dict() of this DP rank.
Value zero_optimizer_state(const TrainingState& s, PtBuilder& builder) {
  const bool zero = is_zero_optimizer(s.layout);
  const std::int64_t rank = s.ranks.dp;
  Value dict = Value::dict();
  if (zero) {
    dict.set("loss_scaler", loss_scaler_object(s.loss_scaler));
    dict.set("dynamic_loss_scale", Value::boolean(s.loss_scaler.dynamic));
    dict.set("overflow", Value::boolean(false));
  }
  dict.set("clip_grad", Value::real(s.clip_grad));
  dict.set("base_optimizer_state", partitioned_adam_state(s, builder));
  // ZeRO saves its partitions narrowed by the group padding (the last rank's tail; torch still
  // writes the whole storage), BF16_Optimizer saves them whole.
  Value partitions = Value::list();
  Value paddings = Value::list();
  Value counts = Value::list();
  for (std::size_t g = 0; g < s.zero->size(); ++g) {
    const train::ZeroGroup& group = (*s.zero)[g];
    const std::int64_t padding = group.group_padding(rank);
    const std::int64_t kept =
        zero ? std::max<std::int64_t>(group.partition_numel - padding, 0) : group.partition_numel;
    partitions.push(
        builder.view(partition_bytes(s, s.master, g), tensor::DType::kFloat32, {kept}, true));
    paddings.push(Value::integer(padding));
    counts.push(Value::integer(s.zero->dp_size()));
  }
  dict.set("single_partition_of_fp32_groups", std::move(partitions));
  if (zero) dict.set("zero_stage", zero_stage_enum(s.zero_stage));
  dict.set("group_paddings", std::move(paddings));
  dict.set("partition_count", std::move(counts));
  dict.set("ds_version", Value::string(std::string(kDeepSpeedVersion)));
  dict.set("param_slice_mappings", slice_mappings(s));
  return dict;
}

Value ds_config_of(const TrainingState& s) {
  return s.ds_config.is(Value::Kind::kNone) ? Value::dict() : s.ds_config;
}

// Megatron's args with the counters save_checkpoint's caller keeps in them.
Value args_of(const TrainingState& s) {
  Value fields = Value::dict();
  if (!s.args.is(Value::Kind::kNone)) {
    if (!s.args.is(Value::Kind::kObject) || s.args.qualified_name() != "argparse.Namespace" ||
        !s.args.state() || !s.args.state()->is(Value::Kind::kDict)) {
      base::fail("saving checkpoint: args must be an argparse.Namespace");
    }
    fields = *s.args.state();
  }
  fields.set("iteration", Value::integer(s.iteration));
  fields.set("consumed_train_samples", Value::integer(s.consumed_train_samples));
  fields.set("consumed_valid_samples", Value::integer(s.consumed_valid_samples));
  fields.set("consumed_train_tokens", Value::integer(s.consumed_train_tokens));
  return Value::namespace_object(std::move(fields));
}

void write_model_states(const StagedFolder& folder, const TrainingState& s,
                        const std::vector<OptimizerGroup>& groups, const SaveOptions& options) {
  PtBuilder builder(options.storage_location);
  Value root = Value::dict();
  root.set("module", Value::none());
  root.set("buffer_names", buffer_names(s));
  Value optimizer;
  if (options.save_optimizer && s.layout == OptimizerLayout::kFp32) {
    optimizer = per_param_adam_state(s, groups, builder);
  } else if (options.save_optimizer && s.layout == OptimizerLayout::kFp16) {
    optimizer = fp16_optimizer_state(s, groups, builder);
  }
  root.set("optimizer", std::move(optimizer));
  root.set("param_shapes", has_zero_file(s.layout) ? param_shapes(s, groups) : Value::none());
  root.set("lr_scheduler", lr_scheduler_dict(s.lr_scheduler));
  root.set("data_sampler", Value::none());
  root.set("random_ltd", Value::none());
  root.set("sparse_tensor_module_names", empty_set());
  root.set("skipped_steps", Value::integer(s.skipped_steps));
  root.set("global_steps", Value::integer(s.global_steps));
  root.set("global_samples", Value::integer(s.global_samples));
  root.set("dp_world_size", Value::integer(s.ranks.dp_size));
  root.set("mp_world_size", Value::integer(s.ranks.mp_size()));
  root.set("ds_config", ds_config_of(s));
  root.set("ds_version", Value::string(std::string(kDeepSpeedVersion)));
  // Megatron's client state.
  root.set("args", args_of(s));
  root.set("checkpoint_version", Value::real(kCheckpointVersion));
  root.set("iteration", Value::integer(s.iteration));
  root.set("tokens", Value::integer(s.consumed_train_tokens));
  Value info = Value::dict();
  info.set("padded_vocab_size", Value::integer(s.padded_vocab_size));
  info.set("original_vocab_size", Value::integer(s.original_vocab_size));
  root.set("checkpoint_info", std::move(info));
  if (options.save_rng) add_megatron_rng_states(root, s.seed, s.ranks.tp, s.ranks.pp, builder);
  builder.write(folder.file(model_states_file_name(s.ranks.mp_rank())), root);
}

void write_zero_file(const StagedFolder& folder, const TrainingState& s,
                     const SaveOptions& options) {
  PtBuilder builder(options.storage_location);
  Value root = Value::dict();
  root.set("optimizer_state_dict", zero_optimizer_state(s, builder));
  root.set("ds_config", ds_config_of(s));
  root.set("ds_version", Value::string(std::string(kDeepSpeedVersion)));
  builder.write(folder.file(zero_file_name(s.layout, s.ranks.dp, s.ranks.mp_rank())), root);
}

}  // namespace

void write_deepspeed_rank_files(const StagedFolder& folder, const TrainingState& state,
                                const SaveOptions& options) {
  check_state_buffers(state, options.save_optimizer, options.save_optimizer, "saving checkpoint");
  if (state.ranks.dp == 0) {
    write_layer_files(folder, state, options);
    write_model_states(folder, state, optimizer_groups(*state.table), options);
  }
  if (options.save_optimizer && has_zero_file(state.layout)) {
    write_zero_file(folder, state, options);
  }
}

void save_deepspeed_checkpoint(const std::string& dir, const TrainingState& state,
                               const SaveOptions& options, dist::Communicator* world) {
  check_state_buffers(state, options.save_optimizer, options.save_optimizer, "saving checkpoint");
  if (state.global_steps < 0) base::fail("saving checkpoint: negative global_steps");
  const std::string tag = tag_for_step(state.global_steps);
  const bool several = world != nullptr && world->size() > 1;
  const bool leader = !several || world->rank() == 0;
  // With several ranks, rank 0 makes the staging folder (under a name every rank knows), all
  // write their files into it, and rank 0 publishes it and moves `latest` once all are done.
  std::optional<StagedFolder> folder;
  if (leader) folder.emplace(dir + "/" + tag, several ? "ranks" : "");
  if (several) world->barrier();
  if (!leader) folder.emplace(dir + "/" + tag, "ranks", StagedFolder::Role::kJoin);
  write_deepspeed_rank_files(*folder, state, options);
  if (several) world->barrier();
  if (leader) {
    folder->commit();
    write_text_file_atomically(dir + "/latest", tag);
  }
  if (several) world->barrier();
}

std::optional<std::string> read_latest_tag(const std::string& dir) {
  const std::string path = dir + "/latest";
  std::optional<std::string> text = read_text_file_if_exists(path);
  if (!text) return std::nullopt;
  // DeepSpeed reads it with .strip().
  const auto first = text->find_first_not_of(" \t\r\n");
  if (first == std::string::npos) base::fail(path, ": empty (expected a tag like global_step100)");
  const auto last = text->find_last_not_of(" \t\r\n");
  return text->substr(first, last - first + 1);
}

}  // namespace mds::ckpt
