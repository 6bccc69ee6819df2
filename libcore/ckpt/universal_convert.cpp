#include "ckpt/universal_convert.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/ordered_pipeline.h"
#include "base/progress.h"
#include "base/stop_signal.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/pt_builder.h"
#include "ckpt/universal_extract.h"
#include "ckpt/universal_merge.h"
#include "io/torch_file.h"

namespace mds::ckpt {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string megabytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

// The output folder as an absolute path; it must not be, or contain, the input checkpoint (the
// rename at the end would replace it).
std::string output_path(const std::string& output, const UniversalSource& source) {
  fs::path out = fs::absolute(output).lexically_normal();
  if (!out.has_filename() && out.has_parent_path()) out = out.parent_path();
  if (out.filename().empty() || out.filename() == "." || out.filename() == "..") {
    base::fail("--output_folder ", output, ": not a folder name");
  }
  const auto canonical = [](const fs::path& path) {
    std::error_code error;
    const fs::path resolved = fs::weakly_canonical(path, error);
    return error ? path : resolved;
  };
  const fs::path in = canonical(source.folder);
  const fs::path target = canonical(out);
  // The input lies inside the output when every component of the output begins its path.
  if (std::mismatch(target.begin(), target.end(), in.begin(), in.end()).first == target.end()) {
    base::fail("--output_folder ", output, " holds the input checkpoint ", source.folder,
               ": write the universal checkpoint elsewhere");
  }
  return out.string();
}

std::vector<std::unique_ptr<StageRank>> build_stages(const UniversalSource& source) {
  std::vector<std::unique_ptr<StageRank>> stages;
  for (std::int64_t pp = 0; pp < source.pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
      stages.push_back(std::make_unique<StageRank>(source, pp, tp));
    }
  }
  return stages;
}

// The parameters the universal checkpoint stores (TP rank 0's view of each stage): every stage's
// own parameters, the last stage's copy of the tied embedding excepted.
std::vector<const model::ParamSpec*> universal_params(
    const UniversalSource& source, const std::vector<std::unique_ptr<StageRank>>& stages) {
  std::vector<const model::ParamSpec*> params;
  std::set<std::string> names;
  for (std::int64_t pp = 0; pp < source.pp_size; ++pp) {
    for (const model::ParamSpec* param :
         stored_params(*stages[static_cast<std::size_t>(pp * source.tp_size)])) {
      if (!names.insert(param->engine_name()).second) {
        base::fail("two pipeline stages hold ", param->engine_name());
      }
      params.push_back(param);
    }
  }
  return params;
}

struct ExtractTask {
  const StageRank* stage = nullptr;
  std::int64_t dp = 0;
};

// Fails unless a rank's files agree with the first rank's on the iteration and the steps.
void check_same_save(const UniversalSource& source, const ExtractTask& task,
                     const RankSummary& found, const RankSummary& first) {
  if (found.iteration != first.iteration || found.global_steps != first.global_steps) {
    base::fail(source.model_states_path(task.stage->pp, task.stage->tp), ": iteration ",
               found.iteration, " (global step ", found.global_steps, "), but ",
               source.model_states_path(0, 0), " has iteration ", first.iteration, " (global step ",
               first.global_steps, "): files of different saves");
  }
  if (found.adam_step != first.adam_step) {
    base::fail(source.optimizer_path(task.stage->pp, task.stage->tp, task.dp), ": Adam step ",
               found.adam_step, ", but ", source.optimizer_path(0, 0, 0), " has step ",
               first.adam_step, ": files of different saves");
  }
}

RankSummary extract_all(const UniversalSource& source,
                        const std::vector<std::unique_ptr<StageRank>>& stages,
                        const std::string& scratch, std::int64_t workers, const base::Log& log) {
  std::vector<ExtractTask> tasks;
  for (const std::unique_ptr<StageRank>& stage : stages) {
    for (std::int64_t dp = 0; dp < source.optimizer_dp_ranks(); ++dp) {
      tasks.push_back({stage.get(), dp});
    }
  }
  const auto threads = static_cast<std::size_t>(
      std::min<std::int64_t>(workers, static_cast<std::int64_t>(tasks.size())));
  log.info("extracting the optimizer state of " + std::to_string(tasks.size()) +
           " rank files with " + std::to_string(threads) + " workers");
  const Clock::time_point start = Clock::now();
  base::Progress progress({"rank files", tasks.size(), 1, 1.0});
  base::OrderedPipeline<ExtractTask, RankSummary> pipeline(
      threads, [&](ExtractTask& task, std::size_t) {
        return extract_rank(source, *task.stage, task.dp, scratch);
      });
  for (const ExtractTask& task : tasks) pipeline.submit(task);
  RankSummary first;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const RankSummary summary = pipeline.next();
    if (i == 0) first = summary;
    check_same_save(source, tasks[i], summary, first);
    bytes += summary.bytes;
    progress.update(i + 1, bytes, i + 1);
    base::throw_if_stop_requested();
  }
  progress.finish();
  log.info("extracted " + megabytes(bytes) + " of fp32 masters and Adam moments in " +
           seconds_text(seconds_since(start)));
  return first;
}

// zero/<name>/<state>.pt for the three states of one parameter; returns the bytes written.
std::uint64_t merge_param(const UniversalSource& source, const model::ParamSpec& param,
                          const std::string& scratch, const std::string& zero_dir) {
  const std::string name = param.engine_name();
  const std::vector<std::int64_t> local(param.local_shape.begin(), param.local_shape.end());
  const std::vector<std::int64_t> full(param.full_shape.begin(), param.full_shape.end());
  const std::string folder = zero_dir + "/" + name;
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) base::fail("cannot create ", folder, ": ", error.message());
  std::uint64_t bytes = 0;
  for (const std::string_view state : kUniversalStates) {
    std::vector<std::vector<float>> slices;
    for (std::int64_t tp = 0; tp < source.tp_size; ++tp) {
      slices.push_back(read_tp_slice(scratch, name, tp, state, source.optimizer_dp_ranks(),
                                     param.local_numel()));
    }
    const std::string what = name + " (" + std::string(state) + ")";
    const UniversalState merged = merge_tp_slices(slices, local, param.split, what);
    slices.clear();
    if (merged.shape != full) {
      base::fail(what, ": the merged tensor has ", merged.values.size(), " elements in ",
                 merged.shape.size(), " dimensions, not the model's shape ",
                 param.full_shape.to_string());
    }
    PtBuilder builder("cpu");
    io::Value dict = io::Value::dict();
    if (merged.cat_dim) dict.set("cat_dim", io::Value::integer(*merged.cat_dim));
    if (param.split == model::TpSplit::kVocab) {
      const std::vector<float> row = vocab_padding_row(merged, source.original_vocab_size);
      dict.set("vocab_divisibility_padding_tensor",
               builder.own(std::string(reinterpret_cast<const char*>(row.data()),
                                       row.size() * sizeof(float)),
                           tensor::DType::kFloat32, {static_cast<std::int64_t>(row.size())}));
    }
    const std::string_view values(reinterpret_cast<const char*>(merged.values.data()),
                                  merged.values.size() * sizeof(float));
    dict.set("param", builder.view(values, tensor::DType::kFloat32, merged.shape));
    builder.write(folder + "/" + std::string(state) + ".pt", dict);
    bytes += values.size();
  }
  fs::remove_all(scratch + "/" + name, error);  // keeps the scratch space to what is unmerged
  return bytes;
}

void merge_all(const UniversalSource& source, const std::vector<const model::ParamSpec*>& params,
               const std::string& scratch, const std::string& zero_dir, std::int64_t workers,
               const base::Log& log) {
  const auto threads = static_cast<std::size_t>(
      std::min<std::int64_t>(workers, static_cast<std::int64_t>(params.size())));
  log.info("merging " + std::to_string(params.size()) + " parameters over " +
           std::to_string(source.tp_size) + " TP and " +
           std::to_string(source.optimizer_dp_ranks()) + " DP ranks with " +
           std::to_string(threads) + " workers");
  const Clock::time_point start = Clock::now();
  base::Progress progress({"parameters", params.size(), 1, 1.0});
  base::OrderedPipeline<const model::ParamSpec*, std::uint64_t> pipeline(
      threads, [&](const model::ParamSpec*& param, std::size_t) {
        return merge_param(source, *param, scratch, zero_dir);
      });
  for (const model::ParamSpec* param : params) pipeline.submit(param);
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    bytes += pipeline.next();
    progress.update(i + 1, bytes, i + 1);
    base::throw_if_stop_requested();
  }
  progress.finish();
  log.info("wrote " + std::to_string(3 * params.size()) + " parameter files (" + megabytes(bytes) +
           ") in " + seconds_text(seconds_since(start)));
}

bool holds_tensor(const io::Value& value) {
  if (value.is(io::Value::Kind::kTensor) || value.is(io::Value::Kind::kStorage)) return true;
  const auto any = [](const std::vector<io::Value>& values) {
    return std::any_of(values.begin(), values.end(), holds_tensor);
  };
  return any(value.items()) || any(value.args()) || (value.state() && holds_tensor(*value.state()));
}

// zero/optimizer_state.pt as DeepSpeed's own v0.2 converter writes it: the optimizer wrapper's
// state of rank (0, 0, 0) without its sharded entries, plus the base optimizer's param_groups
// (apex FusedAdam keeps Adam's step there).
io::Value optimizer_global_state(const UniversalSource& source) {
  const std::string path = source.optimizer_path(0, 0, 0);
  const io::TorchFile file = io::TorchFile::open(path);
  io::Value out = io::Value::dict();
  try {
    const io::ValueRef root = file.root_ref();
    const bool partitioned = has_zero_file(source.layout);
    const io::ValueRef wrapper = partitioned ? root["optimizer_state_dict"] : root["optimizer"];
    std::set<std::string> sharded;
    std::string base_key;
    if (partitioned) {
      base_key = "base_optimizer_state";
      sharded = {base_key, "single_partition_of_fp32_groups", "param_slice_mappings"};
    } else if (source.layout == OptimizerLayout::kFp16) {
      base_key = "optimizer_state_dict";  // FP16_Optimizer
      sharded = {base_key, "fp32_groups_flat"};
    } else {
      sharded = {"state"};  // FusedAdam's own state dict: param_groups stay
    }
    wrapper.dict_size();
    const io::Value& dict = wrapper.value();
    for (std::size_t i = 0; i < dict.size(); ++i) {
      const io::Value& key = dict.keys()[i];
      if (key.is(io::Value::Kind::kString) && sharded.count(key.as_string())) continue;
      if (holds_tensor(dict.items()[i])) {
        base::fail(wrapper.path(), ": unexpected tensor under a key that is not sharded");
      }
      out.set(key, dict.items()[i]);
    }
    if (!base_key.empty()) out.set("param_groups", wrapper[base_key]["param_groups"].value());
    if (!out.find("param_groups")) base::fail(wrapper.path(), ": no param_groups");
  } catch (const base::Error& e) {
    base::fail(path, ": ", e.what());
  }
  return out;
}

}  // namespace

void convert_to_universal_checkpoint(const UniversalArgs& args, const base::Log& log) {
  const Clock::time_point start = Clock::now();
  const UniversalSource source = inspect_universal_source(args.input_folder);
  log.info(
      "converting " + source.folder +
      (source.tag_from_latest ? " (the tag in " + source.dir + "/latest)" : " (the folder given)"));
  log.info("grid T = " + std::to_string(source.tp_size) +
           " x P = " + std::to_string(source.pp_size) + " x D = " + std::to_string(source.dp_size) +
           ", " + std::string(layout_name(source.layout)) + " optimizer layout, vocabulary " +
           std::to_string(source.original_vocab_size) + " padded to " +
           std::to_string(source.padded_vocab_size));
  if (args.target_tp || args.target_pp) {
    log.note("--target_tp and --target_pp are ignored: a universal checkpoint has no grid");
  }
  const std::string output = output_path(args.output_folder, source);
  StagedFolder staged(output);
  const std::string scratch = staged.file("tmp");
  const std::string zero_dir = staged.file("zero");

  const std::vector<std::unique_ptr<StageRank>> stages = build_stages(source);
  const std::vector<const model::ParamSpec*> params = universal_params(source, stages);
  for (const model::ParamSpec* param : params) {
    std::error_code error;
    fs::create_directories(scratch + "/" + param->engine_name(), error);
    if (error)
      base::fail("cannot create ", scratch, "/", param->engine_name(), ": ", error.message());
  }
  const RankSummary saved = extract_all(source, stages, scratch, args.num_extract_workers, log);
  merge_all(source, params, scratch, zero_dir, args.num_merge_workers, log);
  std::error_code error;
  fs::remove_all(scratch, error);
  if (error) base::fail("cannot remove ", scratch, ": ", error.message());

  PtBuilder("cpu").write(zero_dir + "/optimizer_state.pt", optimizer_global_state(source));
  for (std::int64_t mp = 0; mp < source.tp_size * source.pp_size; ++mp) {
    const std::string name = model_states_file_name(mp);
    fs::copy_file(source.folder + "/" + name, staged.file(name), error);
    if (error) base::fail("cannot copy ", source.folder, "/", name, ": ", error.message());
  }
  staged.commit();
  const fs::path out(output);
  write_text_file_atomically((out.parent_path() / "latest_universal").string(),
                             out.filename().string());
  log.info("wrote universal checkpoint " + output + " (iteration " +
           std::to_string(saved.iteration) + ", Adam step " + std::to_string(saved.adam_step) +
           ", " + std::to_string(params.size()) + " parameters) and " +
           (out.parent_path() / "latest_universal").string() + " in " +
           seconds_text(seconds_since(start)));
}

}  // namespace mds::ckpt
