// pretrain: GPT-2 pretraining with upstream's flags, logs and DeepSpeed checkpoints
// (pretrain_gpt.py + the DeepSpeed engine; training.md).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/log.h"
#include "base/program.h"
#include "base/stop_signal.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/json_value.h"
#include "ckpt/resume_universal.h"
#include "ckpt/trainer_checkpoint.h"
#include "config/json_document.h"
#include "config/pretrain_args.h"
#include "data/gpt_dataset.h"
#include "data/train_datasets.h"
#include "data/train_datasets_args.h"
#include "dist/device_communicators.h"
#include "dist/grid_communicators.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "io/indexed_dataset.h"
#include "io/tensorboard_writer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "ops/cpu/local_rank_threads.h"
#include "ops/device_context.h"
#include "tensor/device_memory.h"
#include "text/tokenizer_factory.h"
#include "train/batch_rampup.h"
#include "train/comms_report.h"
#include "train/device_choice.h"
#include "train/model_args.h"
#include "train/skip_ranges.h"
#include "train/trainer.h"

namespace {

using namespace mds;

train::LrFlags lr_flags(const config::PretrainArgs& args, std::int64_t global_batch) {
  train::LrFlags flags;
  flags.lr = args.lr;
  flags.min_lr = args.min_lr;
  flags.decay_style = train::parse_lr_decay_style(args.lr_decay_style);
  flags.train_iters = args.train_iters;
  flags.train_samples = args.train_samples;
  flags.lr_decay_iters = args.lr_decay_iters;
  flags.lr_decay_samples = args.lr_decay_samples;
  flags.lr_decay_tokens = args.lr_decay_tokens;
  flags.lr_warmup_fraction = args.lr_warmup_fraction;
  flags.lr_warmup_iters = args.lr_warmup_iters;
  flags.lr_warmup_samples = args.lr_warmup_samples;
  flags.global_batch_size = global_batch;
  flags.rampup = args.rampup_batch_size.has_value();
  flags.override_lr_scheduler = args.override_lr_scheduler;
  flags.use_checkpoint_lr_scheduler = args.use_checkpoint_lr_scheduler;
  return flags;
}

// A dataset preprocessed for another vocabulary stores ids of the other width: upstream picks
// uint16 below 65500 tokens and int32 above (legacy TNTIDX files are always int32).
// --data-impl as upstream's make_dataset honours it: mmap reads MMIDIDX files only, lazy and cached
// the legacy TNTIDX ones, infer either (upstream's GPTDataset cannot train on TNTIDX at all; mds
// can). Then the token ids must fit the tokenizer's vocabulary.
void check_datasets(const std::vector<std::string>& prefixes, const std::string& data_impl,
                    std::int64_t vocab) {
  for (const std::string& prefix : prefixes) {
    const io::IndexedDataset dataset = io::IndexedDataset::open(prefix);
    const bool mmap = dataset.index().impl == io::DatasetImpl::kMmap;
    if (data_impl != "infer" && (data_impl == "mmap") != mmap) {
      base::fail("dataset ", prefix, " is in the ",
                 mmap ? "MMIDIDX (mmap)" : "TNTIDX (lazy/cached)", " format but --data-impl is ",
                 data_impl, "; give --data-impl ", mmap ? "mmap" : "cached", " or infer");
    }
    if (!mmap) continue;
    const io::DType expected = io::best_fitting_dtype(vocab);
    if (dataset.index().dtype != expected) {
      base::fail("dataset ", prefix, " stores ", io::dtype_name(dataset.index().dtype),
                 " token ids, which preprocess writes for a vocabulary of ",
                 expected == io::DType::kUInt16 ? "65500 tokens or more" : "under 65500 tokens",
                 ", but the tokenizer has ", vocab, ": it was made with another tokenizer");
    }
  }
}

train::TrainingOutputs training_outputs(const config::PretrainArgs& args, const base::Log& log) {
  train::TrainingOutputs outputs;
  outputs.log = &log;
  if (args.metrics_file) outputs.metrics = std::make_unique<train::MetricsLog>(*args.metrics_file);
  if (args.tensorboard_dir) {
    outputs.tensorboard = std::make_unique<io::TensorboardWriter>(*args.tensorboard_dir);
    train::TensorboardOptions& tb = outputs.tensorboard_options;
    tb.log_interval = args.tensorboard_log_interval;
    tb.log_learning_rate = args.log_learning_rate_to_tensorboard;
    tb.log_loss_scale = args.log_loss_scale_to_tensorboard;
    tb.log_batch_size = args.log_batch_size_to_tensorboard;
    tb.log_validation_ppl = args.log_validation_ppl_to_tensorboard;
    tb.log_timers = args.log_timers_to_tensorboard;
  }
  return outputs;
}

// (argparse dest, str(value)) of every resolved argument, as upstream's print_args and
// write_args_to_tensorboard see them.
std::vector<std::pair<std::string, std::string>> argument_values(const config::PretrainArgs& args) {
  std::vector<std::pair<std::string, std::string>> values;
  std::istringstream resolved(args.resolved_arguments);
  for (std::string line; std::getline(resolved, line);) {
    const std::size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::string name = line.substr(0, equals);
    std::replace(name.begin(), name.end(), '-', '_');
    values.emplace_back(std::move(name), line.substr(equals + 1));
  }
  return values;
}

// megatron/arguments.py _print_args: "  name ..... value" lines sorted case-insensitively, also
// written to <--log-path>/args_<time>.txt when that flag is given.
void print_arguments(const config::PretrainArgs& args, const base::Log& log) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : argument_values(args)) {
    const std::size_t dots = name.size() < 48 ? 48 - name.size() : 0;
    lines.push_back("  " + name + " " + std::string(dots, '.') + " " + value);
  }
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return std::tolower(x) < std::tolower(y);
    });
  });
  log.info("------------------------ arguments ------------------------");
  for (const std::string& line : lines) log.info(line);
  log.info("-------------------- end of arguments ---------------------");
  if (args.log_path) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::localtime(&now));
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    base::AtomicFile file(*args.log_path + "/args_" + stamp + ".txt");
    file.write(text.data(), text.size());
    file.commit();
  }
}

// zero_optimization.overlap_comm: the data-parallel reduction overlaps the backward (stages 0
// and 1: the last micro-batch's all-reduce; stage 2: every micro-batch's reduce to the owners).
void describe_gradient_overlap(const train::OptimizerOptions& optimizer,
                               const dist::ProcessGrid& grid, const base::Log& log) {
  if (!optimizer.overlap_reduction || grid.dp_size() < 2) return;
  log.info(
      optimizer.zero_stage == 2
          ? " > data-parallel gradient reduce to the partitions' owners overlapped with the "
            "backward (overlap_comm)"
          : " > data-parallel gradient all-reduce overlapped with the backward (overlap_comm)");
}

// --device, or $MDS_DEVICE when the flag is not given (test harnesses pin the CPU with it), for
// this run: CUDA needs a device and a run the CUDA path implements (train/device_choice.h).
// --gemm-tuning-file's path for this rank: as given for one process, "<path>.rank<N>" for each of
// several (their GEMMs differ with their shards, and each writes its file).
std::string gemm_tuning_file_of_rank(const std::string& path, const config::PretrainArgs& args) {
  return args.world_size > 1 ? path + ".rank" + std::to_string(args.rank) : path;
}

// Each rank of a node takes its own device (train::parse_device_flag_for_rank).
tensor::Device choose_device(const config::PretrainArgs& args, int local_rank,
                             const base::Log& log) {
  std::string requested = args.device;
  if (!args.was_given("--device")) {
    if (const char* env = std::getenv("MDS_DEVICE"); env != nullptr && *env != '\0') {
      requested = env;
    }
  }
  const int devices = tensor::cuda_device_count();
  const train::DeviceChoice choice = train::choose_device(
      train::parse_device_flag_for_rank(requested, local_rank, devices), devices,
      train::cuda_unsupported_reason(args.hidden_size / args.num_attention_heads));
  if (!choice.note.empty()) log.note(choice.note);
  if (choice.device.kind == tensor::DeviceKind::kCuda) {
    log.info(" > training on " + tensor::device_name(choice.device) + " (" +
             tensor::cuda_device_description(choice.device.index) + ")");
  }
  return choice.device;
}

// The launcher's rank and world, with MPI joined when there is more than one process.
struct Processes {
  dist::LaunchInfo launch;
  std::optional<dist::MpiSession> mpi;
  std::unique_ptr<dist::MpiCommunicator> world;
};

void join_processes(Processes& processes) {
  const dist::EnvLookup env = dist::process_env();
  processes.launch = dist::detect_launch(env);
  if (processes.launch.world_size == 1) return;
  processes.mpi.emplace();
  processes.world = dist::MpiCommunicator::world(dist::timeout_seconds_from_env(env, 300.0));
  dist::check_launch_matches_mpi(processes.launch, processes.world->rank(),
                                 processes.world->size());
}

// `started`: the process's start, where --exit-duration-in-mins counts from (upstream's
// _TRAIN_START_TIME, taken when training.py is imported).
int run(int argc, char** argv, Processes& processes,
        std::chrono::system_clock::time_point started) {
  config::PretrainArgs args = config::parse_pretrain_args(argc, argv);
  int status = 0;
  status = base::run_program("pretrain", [&] {
    join_processes(processes);
    base::install_stop_signal_handlers();
    const bool first_rank = processes.launch.rank == 0;
    // Rank 0 prints and writes the outputs (upstream splits them between rank 0 and the last
    // rank; with data parallelism only the ranks hold the same numbers). Errors reach stderr
    // from every rank.
    std::FILE* const quiet = first_rank ? nullptr : std::fopen("/dev/null", "w");
    if (!first_rank && quiet == nullptr) base::fail("cannot open /dev/null for rank output");
    const base::Log log("pretrain", first_rank ? stdout : quiet, first_rank ? stderr : quiet);
    if (const auto note = ops::cpu::share_cpus_among_local_ranks(processes.launch.local_size))
      log.note(*note);
    config::ProcessEnv process_env;
    process_env.rank = processes.launch.rank;
    process_env.world_size = processes.launch.world_size;
    config::validate_pretrain_args(args, process_env);
    for (const std::string& note : args.notes) log.note(note);
    if (first_rank) print_arguments(args, log);

    const std::unique_ptr<text::Tokenizer> tokenizer = text::build_tokenizer(args.tokenizer);
    const std::int64_t vocab = tokenizer->vocab_size();
    const std::int64_t padded_vocab =
        text::padded_vocab_size(vocab, args.tokenizer, args.tensor_model_parallel_size);
    log.info(" > padded vocab (size: " + std::to_string(vocab) + ") with " +
             std::to_string(padded_vocab - vocab) +
             " dummy tokens (new size: " + std::to_string(padded_vocab) + ")");

    const dist::ProcessGrid grid(static_cast<int>(args.world_size),
                                 static_cast<int>(args.tensor_model_parallel_size),
                                 static_cast<int>(args.pipeline_model_parallel_size));
    const dist::GridCoord coord = grid.coord_of(static_cast<int>(args.rank));
    dist::GridCommunicators groups;
    if (processes.world) groups = dist::make_grid_communicators(*processes.world, grid);

    train::TrainerOptions options;
    options.model = train::model_options_from_args(args, padded_vocab);
    options.model.config.tensor_parallel_size = grid.tp_size();
    options.model.config.tp_rank = coord.tp;
    log.info(" > number of parameters: " +
             std::to_string(model::ParamTable::build(options.model.config).full_numel()));

    const std::int64_t global_batch = *args.global_batch_size;
    if (args.rampup_batch_size) {
      options.rampup = train::parse_rampup_batch_size(*args.rampup_batch_size);
    }
    const train::GlobalBatchSchedule schedule(global_batch, args.micro_batch_size,
                                              args.data_parallel_size, options.rampup);
    options.train_iters = args.train_iters
                              ? *args.train_iters
                              : train::train_iters_for_samples(schedule, *args.train_samples);
    options.global_batch_size = global_batch;
    options.lr_schedule = train::resolve_lr_schedule(lr_flags(args, global_batch));
    const config::DeepSpeedConfig& ds_config = *args.deepspeed_configuration;
    train::AdamHyperParams adam;
    adam.beta1 = args.adam_beta1;
    adam.beta2 = args.adam_beta2;
    adam.eps = args.adam_eps;
    adam.weight_decay = args.weight_decay;
    options.optimizer = train::optimizer_options_from_config(ds_config, adam);
    describe_gradient_overlap(options.optimizer, grid, log);
    options.device = choose_device(args, processes.launch.local_rank, log);
    if (args.tf32 && options.device.kind == tensor::DeviceKind::kCuda) {
      options.fp32_matmul = ops::Fp32Matmul::kTf32;
      log.info(" > fp32 GEMMs round their inputs to TF32 (--tf32)");
    }
    if (args.gemm_tuning_file && options.device.kind == tensor::DeviceKind::kCuda) {
      options.gemm_tuning_file = gemm_tuning_file_of_rank(*args.gemm_tuning_file, args);
      log.info(" > GEMM algorithms: the fastest of cuBLASLt's candidates, kept in " +
               options.gemm_tuning_file + " (--gemm-tuning-file)");
    }
    options.time_kernel_shapes = !args.fixed_kernel_shapes;
    if (args.fixed_kernel_shapes && options.device.kind == tensor::DeviceKind::kCuda) {
      log.info(" > kernels in their default launch shapes (--fixed-kernel-shapes)");
    }
    // Several ranks on devices: device tensors go over NCCL or through host MPI (--distributed-
    // backend); host tensors (losses, norms, flags) still over MPI.
    if (processes.world && options.device.kind == tensor::DeviceKind::kCuda) {
      groups = dist::device_grid_communicators(std::move(groups),
                                               dist::parse_device_backend(args.distributed_backend),
                                               options.device, processes.world->timeout_s());
    }
    // GPTModelPipe's partition_method (the fork's default when the flag is not given).
    const std::vector<std::int64_t> parts = model::pipeline_partition(
        options.model.config, options.optimizer.precision != train::Precision::kFp32,
        grid.pp_size(), args.pp_partition_method.value_or("type:transformer"));
    model::set_stage_specs(options.model.config, parts, coord.pp);
    const model::ParamTable table = model::ParamTable::build(options.model.config);
    options.log_interval = args.log_interval;
    options.eval_interval = args.eval_interval;
    options.eval_iters = args.eval_iters;
    // Upstream tests these with Python truthiness: 0 turns each off (a modulo by 0 here before).
    const auto unless_zero = [](std::optional<std::int64_t> value) {
      return value && *value != 0 ? value : std::nullopt;
    };
    if (args.save) options.save_interval = unless_zero(args.save_interval);
    options.exit_interval = unless_zero(args.exit_interval);
    if (unless_zero(args.exit_duration_in_mins)) {
      options.exit_duration_in_mins = static_cast<double>(*args.exit_duration_in_mins);
      options.process_start = started;
    }
    options.seed = static_cast<std::uint64_t>(args.seed);
    options.steps_per_print = ds_config.steps_per_print;
    options.kill_switch_path = args.kill_switch_path;
    options.train = !args.evaluate_only;
    if (args.skip_train_iteration_range) {
      options.skip_train_iteration_ranges =
          train::parse_skip_train_iteration_ranges(*args.skip_train_iteration_range);
    }
    options.log_params_norm = args.log_params_norm;
    if (args.kill_switch_path && std::filesystem::exists(*args.kill_switch_path)) {
      log.info("Detected kill switch at " + *args.kill_switch_path + ". Exiting");
      return;
    }
    if (tokenizer->eod()) {
      options.batches.eod_token = *tokenizer->eod();
    } else if (args.eod_mask_loss || args.reset_position_ids || args.reset_attention_mask) {
      base::fail(
          "--eod-mask-loss, --reset-position-ids and --reset-attention-mask need the "
          "tokenizer's end-of-document token, and this tokenizer has none (an eos_token)");
    }
    options.batches.eod_mask_loss = args.eod_mask_loss;
    options.batches.reset_position_ids = args.reset_position_ids;

    data::TrainDatasetsArgs datasets_args = data::train_datasets_args(args);
    check_datasets(data::dataset_prefixes(datasets_args), args.data_impl, vocab);
    data::SampleCountArgs counts;
    counts.train_iters = options.train_iters;
    counts.train_samples = args.train_samples;
    counts.global_batch_size = global_batch;
    counts.eval_interval = args.eval_interval;
    counts.eval_iters = args.eval_iters;
    datasets_args.num_samples = data::train_valid_test_num_samples(counts);
    datasets_args.seq_length = *args.seq_length;
    datasets_args.seed = args.seed;
    data::TrainValidTestDatasets datasets = data::build_train_valid_test_datasets(
        datasets_args, [&log](const std::string& line) { log.info(line); });

    ckpt::RunDescription run_description;
    run_description.args = &args;
    run_description.padded_vocab_size = padded_vocab;
    run_description.original_vocab_size = vocab;
    run_description.ds_config =
        ckpt::json_to_value(config::parse_json(ds_config.json_text, ds_config.source));
    run_description.ranks.tp = coord.tp;
    run_description.ranks.pp = coord.pp;
    run_description.ranks.dp = coord.dp;
    run_description.ranks.tp_size = grid.tp_size();
    run_description.ranks.pp_size = grid.pp_size();
    run_description.ranks.dp_size = grid.dp_size();

    options.data_parallel = groups.dp.get();
    options.tensor_parallel = groups.tp.get();
    options.model_parallel = groups.mp.get();
    options.pipeline = groups.pp.get();
    options.embedding = groups.embedding.get();
    options.world = processes.world.get();
    train::TrainingOutputs outputs;
    if (first_rank) {
      outputs = training_outputs(args, log);
    } else {
      outputs.log = &log;
    }
    train::Trainer trainer(options, table, std::move(datasets), std::move(outputs));
    trainer.initialize_parameters();
    // Megatron's --universal-checkpoint sets DeepSpeed's checkpoint.load_universal.
    if (args.load && (args.universal_checkpoint || ds_config.checkpoint.load_universal)) {
      ckpt::load_universal_checkpoint(*args.load, trainer, run_description, log);
    } else if (args.load) {
      ckpt::load_trainer_checkpoint(*args.load, trainer, run_description, log);
    }

    // training.py: write_args_to_tensorboard and log_restart_to_tensorboard once the iteration
    // a run starts from is known.
    if (const auto& tensorboard = trainer.outputs().tensorboard) {
      train::write_run_start(*tensorboard, argument_values(args), args.world_size,
                             trainer.progress().iteration);
    }

    std::unique_ptr<ckpt::TrainerCheckpointSaver> saver;
    // Every rank saves together: DP rank 0 of each (pp, tp) writes the weights and model
    // states, every rank its ZeRO file, and rank 0 publishes the folder once all are done.
    if (args.save) {
      ckpt::SaveOptions save_options;
      save_options.save_optimizer = !args.no_save_optim;
      save_options.save_rng = !args.no_save_rng;
      saver = std::make_unique<ckpt::TrainerCheckpointSaver>(
          *args.save, run_description, save_options, log, processes.world.get());
    }
    const train::CommsLogger comms(ds_config.comms_logger, groups, processes.world.get(),
                                   trainer.progress().iteration);
    const train::StopReason reason = trainer.train(saver.get());
    comms.report(log, trainer.progress().iteration);
    if (reason == train::StopReason::kSignal) {
      log.note("stopped by signal " + std::to_string(base::stop_signal_received()) +
               " after iteration " + std::to_string(trainer.progress().iteration) +
               (saver ? " (checkpoint saved)" : " (no --save: nothing saved)"));
    }
  });
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  Processes processes;
  const int status = run(argc, argv, processes, started);
  // One failed rank stops the job instead of leaving the others waiting for it.
  if (status != 0 && processes.world) MPI_Abort(MPI_COMM_WORLD, status);
  return status;
}
