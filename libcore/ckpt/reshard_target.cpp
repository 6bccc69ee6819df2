#include "ckpt/reshard_target.h"

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "ops/elementwise.h"

namespace mds::ckpt {

io::Value target_args(const io::Value& saved, const TargetGrid& grid,
                      std::int64_t padded_vocab_size, std::int64_t pp, std::int64_t tp) {
  if (!saved.is(io::Value::Kind::kObject) || saved.state() == nullptr ||
      !saved.state()->is(io::Value::Kind::kDict)) {
    base::fail("target_args: the saved args are not an argparse.Namespace");
  }
  io::Value fields = *saved.state();
  fields.set("tensor_model_parallel_size", io::Value::integer(grid.tp_size));
  fields.set("pipeline_model_parallel_size", io::Value::integer(grid.pp_size));
  fields.set("padded_vocab_size", io::Value::integer(padded_vocab_size));
  fields.set("world_size", io::Value::integer(grid.tp_size * grid.pp_size));
  fields.set("data_parallel_size", io::Value::integer(1));
  fields.set("rank", io::Value::integer(pp * grid.tp_size + tp));
  if (grid.partition_method) {
    fields.set("pp_partition_method", io::Value::string(*grid.partition_method));
  }
  return io::Value::namespace_object(std::move(fields));
}

void plan_target_grid(const model::GptConfig& config, bool sixteen_bit, TargetGrid& grid) {
  const auto divides = [&](const char* what, std::int64_t count) {
    if (count % grid.tp_size != 0) {
      base::fail("--target-tensor-model-parallel-size ", grid.tp_size, " does not divide the ",
                 count, " ", what, " (each TP rank holds an equal share)");
    }
  };
  divides("attention heads", config.num_attention_heads);
  divides("FFN hidden units", config.ffn());
  divides("padded vocabulary rows", config.padded_vocab_size);
  model::GptConfig tp_config = config;
  tp_config.tensor_parallel_size = grid.tp_size;
  grid.parts = model::pipeline_partition(tp_config, sixteen_bit, grid.pp_size,
                                         grid.partition_method.value_or("type:transformer"));
  for (std::int64_t pp = 0; pp < grid.pp_size; ++pp) {
    model::set_stage_specs(tp_config, grid.parts, pp);  // refuses an empty stage
  }
}

namespace {

std::uint64_t saved_seed(const io::Value& args) {
  const io::Value* seed = args.state() ? args.state()->find("seed") : nullptr;
  return seed != nullptr && seed->is(io::Value::Kind::kInt)
             ? static_cast<std::uint64_t>(seed->as_int())
             : 1234;
}

}  // namespace

void write_target_checkpoint(const std::string& dir, const model::ParamBuffer& full,
                             const model::GptConfig& config, const TargetGrid& grid,
                             const SourceCheckpoint& source, const MergedSource& merged,
                             const base::Log& log) {
  StagedFolder folder(dir + "/" + source.output_tag);
  SaveOptions options;
  options.save_optimizer = false;
  for (std::int64_t pp = 0; pp < grid.pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < grid.tp_size; ++tp) {
      model::GptConfig rank_config = config;
      rank_config.tensor_parallel_size = grid.tp_size;
      rank_config.tp_rank = tp;
      model::set_stage_specs(rank_config, grid.parts, pp);
      const model::ParamTable table = model::ParamTable::build(rank_config);
      const model::ParamBuffer wide(table, tensor::DType::kFloat32);
      model::split_tp_shard(full, grid.tp_size, wide);
      const model::ParamBuffer narrow(table, source.dtype);
      ops::cast(narrow.flat(), wide.flat());

      TrainingState state = merged.counters;
      state.table = &table;
      state.params = narrow.flat();
      state.layout = source.layout;
      state.ranks = CheckpointRanks{tp, pp, 0, grid.tp_size, grid.pp_size, 1};
      state.padded_vocab_size = config.padded_vocab_size;
      state.original_vocab_size = source.original_vocab_size;
      state.seed = saved_seed(source.args);
      state.args = target_args(source.args, grid, config.padded_vocab_size, pp, tp);
      state.ds_config = merged.ds_config;
      log.info(" writing pipeline stage " + std::to_string(pp) + " (specs " +
               std::to_string(grid.parts[static_cast<std::size_t>(pp)]) + "-" +
               std::to_string(grid.parts[static_cast<std::size_t>(pp) + 1] - 1) + "), TP rank " +
               std::to_string(tp) + ": " + std::to_string(table.saved_layers().size()) +
               " layer files and " + model_states_file_name(state.ranks.mp_rank()));
      write_deepspeed_rank_files(folder, state, options);
    }
  }
  folder.commit();
  write_text_file_atomically(dir + "/latest", source.output_tag);
}

}  // namespace mds::ckpt
