#include "ckpt/universal_extract.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "model/param_buffer.h"
#include "tensor/buffer.h"

namespace mds::ckpt {

namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Scratch files need no atomic rename or fsync: the whole output folder is published at the end.
void write_raw(const std::string& path, const float* data, std::int64_t numel) {
  const File file(std::fopen(path.c_str(), "wb"));
  if (!file) base::fail_errno("cannot create " + path);
  const auto n = static_cast<std::size_t>(numel);
  if (std::fwrite(data, sizeof(float), n, file.get()) != n || std::fflush(file.get()) != 0) {
    base::fail_errno("cannot write " + path);
  }
}

std::string fragment_path(const std::string& scratch, const std::string& engine_name,
                          std::int64_t tp, std::string_view state, std::int64_t dp) {
  return scratch + "/" + engine_name + "/" + std::to_string(tp) + "." + std::string(state) + "." +
         std::to_string(dp);
}

}  // namespace

StageRank::StageRank(const UniversalSource& source, std::int64_t pp_rank, std::int64_t tp_rank)
    : pp(pp_rank),
      tp(tp_rank),
      table(model::ParamTable::build(source.stage_config(pp_rank, tp_rank))),
      zero(table, source.dp_size) {}

std::vector<const model::ParamSpec*> stored_params(const StageRank& stage) {
  std::vector<const model::ParamSpec*> params;
  for (const model::ParamSpec& param : stage.table.params()) {
    if (!param.tied_replica) params.push_back(&param);
  }
  return params;
}

RankSummary extract_rank(const UniversalSource& source, const StageRank& stage, std::int64_t dp,
                         const std::string& scratch) {
  const model::ParamTable& table = stage.table;
  const bool partitioned = has_zero_file(source.layout);
  TrainingState state;
  state.table = &table;
  state.layout = source.layout;
  state.ranks = {stage.tp, stage.pp, dp, source.tp_size, source.pp_size, source.dp_size};
  state.rotary_head_dim = source.rotary_head_dim;
  if (partitioned) state.zero = &stage.zero;
  const model::ParamBuffer params(table, params_dtype(source.layout));
  state.params = params.flat();
  // Master and moments: this rank's partitions back to back, or the stage's table layout.
  const std::int64_t n = partitioned ? stage.zero.partition_numel() : table.buffer_numel();
  const tensor::Buffer buffer(static_cast<std::size_t>(3 * n) * sizeof(float), tensor::Device{});
  const tensor::Tensor all = buffer.as(tensor::DType::kFloat32, tensor::Shape{3 * n});
  state.master = all.narrow(0, n);
  state.exp_avg = all.narrow(n, n);
  state.exp_avg_sq = all.narrow(2 * n, n);
  LoadOptions options;
  options.load_rng = false;
  // fp32 without ZeRO keeps no separate master: the layer files' weights are the masters.
  options.load_weights = source.layout == OptimizerLayout::kFp32;
  load_deepspeed_checkpoint(source.dir, source.tag, state, options);

  const float* master = static_cast<const float*>(
      source.layout == OptimizerLayout::kFp32 ? state.params.raw() : state.master.raw());
  const std::array<const float*, 3> states = {master,
                                              static_cast<const float*>(state.exp_avg.raw()),
                                              static_cast<const float*>(state.exp_avg_sq.raw())};
  RankSummary summary{state.iteration, state.global_steps, state.adam_step, 0};
  const auto write = [&](const model::ParamSpec& param, std::int64_t offset, std::int64_t numel) {
    for (std::size_t s = 0; s < kUniversalStates.size(); ++s) {
      write_raw(fragment_path(scratch, param.engine_name(), stage.tp, kUniversalStates[s], dp),
                states[s] + offset, numel);
    }
    summary.bytes += static_cast<std::uint64_t>(3 * numel) * sizeof(float);
  };
  if (!partitioned) {
    for (const model::ParamSpec* param : stored_params(stage)) {
      write(*param, param->offset, param->local_numel());
    }
    return summary;
  }
  std::int64_t group_offset = 0;
  for (std::size_t g = 0; g < stage.zero.size(); ++g) {
    const train::ZeroGroup& group = stage.zero[g];
    for (const train::ZeroFragment& fragment : group.fragments[static_cast<std::size_t>(dp)]) {
      const model::ParamSpec& param = table[fragment.param];
      if (!param.tied_replica) write(param, group_offset + fragment.hp_start, fragment.numel);
    }
    group_offset += group.partition_numel;
  }
  return summary;
}

std::vector<float> read_tp_slice(const std::string& scratch, const std::string& engine_name,
                                 std::int64_t tp, std::string_view state, std::int64_t dp_ranks,
                                 std::int64_t numel) {
  std::vector<float> slice(static_cast<std::size_t>(numel));
  std::size_t filled = 0;
  for (std::int64_t dp = 0; dp < dp_ranks; ++dp) {
    const std::string path = fragment_path(scratch, engine_name, tp, state, dp);
    const File file(std::fopen(path.c_str(), "rb"));
    if (!file) {
      if (errno == ENOENT) continue;  // this rank holds no part of the parameter
      base::fail_errno("cannot open " + path);
    }
    std::error_code error;
    const std::uintmax_t bytes = std::filesystem::file_size(path, error);
    if (error) base::fail("cannot read the size of ", path, ": ", error.message());
    const std::size_t count = static_cast<std::size_t>(bytes) / sizeof(float);
    if (bytes % sizeof(float) != 0 || count > slice.size() - filled) {
      base::fail(engine_name, " (", state, ", TP rank ", tp, "): the data-parallel fragments hold ",
                 "more than its ", numel, " elements");
    }
    if (std::fread(slice.data() + filled, sizeof(float), count, file.get()) != count) {
      base::fail_errno("cannot read " + path);
    }
    filled += count;
  }
  if (filled != slice.size()) {
    base::fail(engine_name, " (", state, ", TP rank ", tp, "): the data-parallel fragments hold ",
               filled, " of its ", numel, " elements");
  }
  return slice;
}

}  // namespace mds::ckpt
