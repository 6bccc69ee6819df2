// convert-to-universal-checkpoint on a synthetic two-stage checkpoint with 12 data-parallel ranks
// (upstream v0.1 sorts and globs ZeRO files as text, which breaks from D = 11): every rank's file
// written by save_deepspeed_checkpoint, the fragments put back in numeric rank order, the last
// stage's tied embedding replica left out. (Grids with TP: e2e convert_universal_test.sh.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/log.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/universal_convert.h"
#include "ckpt_test_state.h"
#include "io/torch_file.h"
#include "model/param_buffer.h"
#include "model/pipeline_partition.h"
#include "ops/elementwise.h"
#include "test_support.h"
#include "train/zero_partition.h"

namespace mds::ckpt {
namespace {

namespace fs = std::filesystem;
using io::Value;
using testing::sample;
using testing_support::ScratchDir;

constexpr std::int64_t kStages = 2;
constexpr std::int64_t kDataParallel = 12;

Value grid_args() {
  Value fields = Value::dict();
  fields.set("num_layers", Value::integer(2));
  fields.set("hidden_size", Value::integer(16));
  fields.set("ffn_hidden_size", Value::integer(64));
  fields.set("num_attention_heads", Value::integer(2));
  fields.set("max_position_embeddings", Value::integer(8));
  fields.set("seq_length", Value::integer(8));
  fields.set("tensor_model_parallel_size", Value::integer(1));
  fields.set("pipeline_model_parallel_size", Value::integer(kStages));
  return Value::namespace_object(std::move(fields));
}

model::GptConfig stage_config(std::int64_t pp) {
  model::GptConfig config = testing::tiny_config();
  model::set_stage_specs(config,
                         model::pipeline_partition(config, true, kStages, "type:transformer"), pp);
  return config;
}

// Distinct values per stage, state and table position (the stages' tables overlap in offsets).
float value(std::int64_t pp, std::uint32_t stream, std::int64_t j) {
  const float v = sample(stream, j + 100000 * pp);
  return stream == 4 ? std::abs(v) : v;
}

// One stage's checkpoint files of all its data-parallel ranks, written into `folder`.
void save_stage(std::int64_t pp, OptimizerLayout layout, const ScratchDir& scratch,
                const std::string& folder) {
  const model::ParamTable table = model::ParamTable::build(stage_config(pp));
  const train::ZeroLayout zero(table, kDataParallel);
  const model::ParamBuffer params(table, params_dtype(layout));
  std::vector<model::ParamBuffer> values;
  for (std::uint32_t stream = 2; stream <= 4; ++stream) {
    values.emplace_back(table, tensor::DType::kFloat32);
    for (const model::ParamSpec& p : table.params()) {
      for (std::int64_t j = p.offset; j < p.offset + p.local_numel(); ++j) {
        values.back().flat().data<float>()[j] = value(pp, stream, j);
      }
    }
  }
  ops::cast(params.flat(), values[0].flat());  // the weights are the masters rounded
  const std::int64_t n = zero.partition_numel();
  for (std::int64_t dp = 0; dp < kDataParallel; ++dp) {
    tensor::Buffer partitions(static_cast<std::size_t>(3 * n) * sizeof(float), tensor::Device{});
    const tensor::Tensor all = partitions.as(tensor::DType::kFloat32, tensor::Shape{3 * n});
    TrainingState s;
    s.table = &table;
    s.layout = layout;
    s.zero = &zero;
    s.params = params.flat();
    s.master = all.narrow(0, n);
    s.exp_avg = all.narrow(n, n);
    s.exp_avg_sq = all.narrow(2 * n, n);
    const tensor::Tensor targets[3] = {s.master, s.exp_avg, s.exp_avg_sq};
    for (std::size_t k = 0; k < 3; ++k) {
      std::int64_t offset = 0;
      for (std::size_t g = 0; g < zero.size(); ++g) {
        train::gather_partition(values[k].flat(), zero, g, dp,
                                targets[k].narrow(offset, zero[g].partition_numel));
        offset += zero[g].partition_numel;
      }
    }
    s.ranks = {0, pp, dp, 1, kStages, kDataParallel};
    s.adam_step = 7;
    s.iteration = s.global_steps = 12;
    s.padded_vocab_size = 64;
    s.original_vocab_size = 50;
    s.args = grid_args();
    s.ds_config = Value::dict();
    const std::string dir = scratch.file("rank" + std::to_string(pp) + "_" + std::to_string(dp));
    save_deepspeed_checkpoint(dir, s);
    for (const auto& entry : fs::directory_iterator(dir + "/global_step12")) {
      fs::copy_file(entry.path(), folder + "/" + entry.path().filename().string());
    }
  }
}

class UniversalGrid : public ::testing::TestWithParam<OptimizerLayout> {};

TEST_P(UniversalGrid, TwelveDataParallelRanksTwoStages) {
  ScratchDir scratch;
  const std::string folder = scratch.file("ckpt/global_step12");
  fs::create_directories(folder);
  for (std::int64_t pp = 0; pp < kStages; ++pp) save_stage(pp, GetParam(), scratch, folder);
  testing_support::write_file(scratch.file("ckpt/latest"), "global_step12");

  UniversalArgs args;
  args.input_folder = scratch.file("ckpt");
  args.output_folder = scratch.file("ckpt/global_step12_universal");
  std::FILE* quiet = std::fopen("/dev/null", "w");
  convert_to_universal_checkpoint(args, base::Log("convert", quiet, quiet));
  std::fclose(quiet);

  std::size_t folders = 0;
  for (std::int64_t pp = 0; pp < kStages; ++pp) {
    const model::ParamTable table = model::ParamTable::build(stage_config(pp));
    for (const model::ParamSpec& p : table.params()) {
      if (p.tied_replica) continue;  // stage 1's copy of the embedding: not written
      ++folders;
      for (std::uint32_t stream = 2; stream <= 4; ++stream) {
        const char* state = stream == 2 ? "fp32" : stream == 3 ? "exp_avg" : "exp_avg_sq";
        const std::string path =
            args.output_folder + "/zero/" + p.engine_name() + "/" + state + ".pt";
        const io::TorchFile file = io::TorchFile::open(path);
        const std::string bytes = file.tensor_bytes(file.root_ref()["param"].as_tensor());
        ASSERT_EQ(bytes.size(), static_cast<std::size_t>(p.full_numel()) * sizeof(float)) << path;
        std::vector<float> found(static_cast<std::size_t>(p.full_numel()));
        std::memcpy(found.data(), bytes.data(), bytes.size());
        std::int64_t wrong = 0;
        for (std::int64_t k = 0; k < p.full_numel(); ++k) {
          wrong += found[static_cast<std::size_t>(k)] != value(pp, stream, p.offset + k);
        }
        EXPECT_EQ(wrong, 0) << path;
      }
    }
  }
  std::size_t written = 0;
  for (const auto& entry : fs::directory_iterator(args.output_folder + "/zero")) {
    written += entry.is_directory();
  }
  EXPECT_EQ(written, folders);
  EXPECT_EQ(folders, 28u);
  EXPECT_TRUE(fs::exists(args.output_folder + "/mp_rank_01_model_states.pt"));
  EXPECT_EQ(testing_support::read_file(scratch.file("ckpt/latest_universal")),
            "global_step12_universal");
}

INSTANTIATE_TEST_SUITE_P(Layouts, UniversalGrid,
                         ::testing::Values(OptimizerLayout::kBf16, OptimizerLayout::kFp16Zero1),
                         [](const auto& param_info) {
                           std::string name(layout_name(param_info.param));
                           std::erase(name, '-');
                           return name;
                         });

}  // namespace
}  // namespace mds::ckpt
