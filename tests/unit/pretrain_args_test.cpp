#include "config/pretrain_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/flags.h"
#include "pretrain_command_line.h"
#include "test_support.h"
#include "train/model_args.h"

namespace mds::config {
namespace {

using testing_support::ScratchDir;
using testing_support::write_file;

using testing_support::Argv;

constexpr const char* kConfig = R"({
  "train_micro_batch_size_per_gpu": 4,
  "train_batch_size": 8,
  "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0},
  "steps_per_print": 2000,
  "wall_clock_breakdown": false
})";

// The command line of the issue (one process, fp32, DeepSpeed ZeRO-0).
std::vector<std::string> issue_command_line(const std::string& config_path) {
  return testing_support::issue_command_line(config_path, "data/gpt2/vocab.json",
                                             "data/gpt2/merges.txt");
}

PretrainArgs parse(std::vector<std::string> line) {
  Argv argv(std::move(line));
  return parse_pretrain_args(argv.argc(), argv.argv());
}

// `line` without `flag` and the `values` words after it.
std::vector<std::string> without(std::vector<std::string> line, const std::string& flag,
                                 int values) {
  const auto at = std::find(line.begin(), line.end(), flag);
  if (at != line.end()) line.erase(at, at + 1 + values);
  return line;
}

std::vector<std::string> with(std::vector<std::string> line,
                              const std::vector<std::string>& extra) {
  line.insert(line.end(), extra.begin(), extra.end());
  return line;
}

std::string validation_error(std::vector<std::string> line, ProcessEnv env = {}) {
  PretrainArgs args = parse(std::move(line));
  try {
    validate_pretrain_args(args, env);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

class PretrainArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.file("cfg.json");
    write_file(config_, kConfig);
  }
  std::vector<std::string> line() const { return issue_command_line(config_); }
  // A ds_config file with `json` as content.
  std::string config_file(const std::string& name, const std::string& json) const {
    const std::string path = dir_.file(name);
    write_file(path, json);
    return path;
  }

  ScratchDir dir_;
  std::string config_;
};

TEST_F(PretrainArgsTest, ParsesTheIssueCommandLine) {
  PretrainArgs a = parse(line());
  EXPECT_EQ(a.num_layers, 4);
  EXPECT_EQ(a.hidden_size, 256);
  EXPECT_EQ(a.num_attention_heads, 4);
  EXPECT_EQ(a.seq_length, 256);
  EXPECT_EQ(a.max_position_embeddings, 256);
  EXPECT_EQ(a.micro_batch_size, 4);
  EXPECT_EQ(a.global_batch_size, 8);
  EXPECT_EQ(a.train_iters, 2000);
  EXPECT_FALSE(a.train_samples);
  EXPECT_EQ(a.lr, 6e-4);
  EXPECT_EQ(a.min_lr, 6e-5);
  EXPECT_EQ(a.lr_decay_style, "cosine");
  EXPECT_EQ(a.lr_warmup_iters, 100);
  EXPECT_EQ(a.weight_decay, 0.1);
  EXPECT_EQ(a.clip_grad, 1.0);
  ASSERT_TRUE(a.data_path);
  EXPECT_EQ(*a.data_path, (std::vector<std::string>{"1.0", "data/x_text_document"}));
  EXPECT_EQ(a.tokenizer.vocab_file, "data/gpt2/vocab.json");
  EXPECT_EQ(a.tokenizer.merge_file, "data/gpt2/merges.txt");
  EXPECT_EQ(a.tokenizer.tokenizer_type, "GPT2BPETokenizer");
  EXPECT_EQ(a.split, "969,30,1");
  EXPECT_EQ(a.eval_interval, 200);
  EXPECT_EQ(a.eval_iters, 10);
  EXPECT_EQ(a.log_interval, 10);
  EXPECT_EQ(a.save, "ckpt");
  EXPECT_EQ(a.save_interval, 500);
  EXPECT_EQ(a.load, "ckpt");
  EXPECT_TRUE(a.deepspeed);
  EXPECT_EQ(a.deepspeed_config, config_);
  EXPECT_TRUE(a.was_given("--clip-grad"));
  EXPECT_TRUE(a.was_given("--deepspeed"));
  EXPECT_FALSE(a.was_given("--fp16"));
  EXPECT_NE(a.resolved_arguments.find("num-layers=4"), std::string::npos);

  validate_pretrain_args(a, ProcessEnv{});
  EXPECT_EQ(a.ffn_hidden_size, 1024);
  EXPECT_EQ(a.kv_channels, 64);
  EXPECT_EQ(a.encoder_seq_length, 256);
  EXPECT_EQ(a.split, "969,30,1");  // given, so not replaced by the default
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.world_size, 1);
  EXPECT_EQ(a.data_parallel_size, 1);
  EXPECT_EQ(a.params_dtype, ParamsDtype::kFloat32);
  EXPECT_FALSE(a.accumulate_allreduce_grads_in_fp32);
  ASSERT_TRUE(a.deepspeed_configuration);
  EXPECT_EQ(a.deepspeed_configuration->gradient_clipping, 1.0);
  EXPECT_EQ(a.deepspeed_batch.train_batch_size, 8);
  EXPECT_EQ(a.deepspeed_batch.micro_batch_size, 4);
  EXPECT_EQ(a.deepspeed_batch.gradient_accumulation_steps, 2);
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_EQ(a.notes[0],
            "--clip-grad: not used in DeepSpeed mode; gradients are clipped at 1 "
            "(gradient_clipping of " +
                config_ + ")");
}

TEST_F(PretrainArgsTest, UpstreamDefaults) {
  PretrainArgs a = parse({"pretrain", "--num-layers", "2", "--hidden-size", "64",
                          "--num-attention-heads", "2", "--micro-batch-size", "2"});
  EXPECT_FALSE(a.ffn_hidden_size);
  EXPECT_FALSE(a.kv_channels);
  EXPECT_FALSE(a.max_position_embeddings);
  EXPECT_EQ(a.tokenizer.make_vocab_size_divisible_by, 128);
  EXPECT_FALSE(a.tokenizer.pad_vocab_size_to);
  EXPECT_EQ(a.tokenizer.tokenizer_type, "GPT2BPETokenizer");
  EXPECT_EQ(a.layernorm_epsilon, 1e-5);
  EXPECT_FALSE(a.sync_tp_duplicated_parameters);
  EXPECT_FALSE(a.openai_gelu);
  EXPECT_FALSE(a.apply_residual_connection_post_layernorm);
  EXPECT_EQ(a.position_embedding_type, PositionEmbeddingType::kAbsolute);
  EXPECT_FALSE(a.glu_activation);
  EXPECT_FALSE(a.kill_switch_path);
  EXPECT_FALSE(a.log_level);
  EXPECT_EQ(a.attention_dropout, 0.1);
  EXPECT_EQ(a.hidden_dropout, 0.1);
  EXPECT_EQ(a.weight_decay, 0.01);
  EXPECT_EQ(a.clip_grad, 1.0);
  EXPECT_EQ(a.adam_beta1, 0.9);
  EXPECT_EQ(a.adam_beta2, 0.999);
  EXPECT_EQ(a.adam_eps, 1e-8);
  EXPECT_EQ(a.sgd_momentum, 0.9);
  EXPECT_FALSE(a.global_batch_size);
  EXPECT_FALSE(a.rampup_batch_size);
  EXPECT_FALSE(a.checkpoint_activations);
  EXPECT_EQ(a.checkpoint_num_layers, 1);
  EXPECT_FALSE(a.train_iters);
  EXPECT_FALSE(a.train_samples);
  EXPECT_FALSE(a.train_tokens);
  EXPECT_EQ(a.log_interval, 100);
  EXPECT_FALSE(a.exit_interval);
  EXPECT_FALSE(a.exit_duration_in_mins);
  EXPECT_FALSE(a.tensorboard_dir);
  EXPECT_TRUE(a.masked_softmax_fusion);
  EXPECT_TRUE(a.bias_gelu_fusion);
  EXPECT_TRUE(a.bias_dropout_fusion);
  EXPECT_EQ(a.optimizer, "adam");
  EXPECT_EQ(a.dataloader_type, "single");
  EXPECT_FALSE(a.pp_partition_method);
  EXPECT_EQ(a.seed, 1234);
  EXPECT_EQ(a.init_method_std, 0.02);
  EXPECT_FALSE(a.lr);
  EXPECT_EQ(a.lr_decay_style, "linear");
  EXPECT_FALSE(a.lr_decay_iters);
  EXPECT_FALSE(a.lr_decay_samples);
  EXPECT_FALSE(a.lr_decay_tokens);
  EXPECT_FALSE(a.lr_warmup_fraction);
  EXPECT_EQ(a.lr_warmup_iters, 0);
  EXPECT_EQ(a.lr_warmup_samples, 0);
  EXPECT_EQ(a.min_lr, 0.0);
  EXPECT_FALSE(a.override_lr_scheduler);
  EXPECT_FALSE(a.use_checkpoint_lr_scheduler);
  EXPECT_FALSE(a.universal_checkpoint);
  EXPECT_FALSE(a.save);
  EXPECT_FALSE(a.save_interval);
  EXPECT_FALSE(a.no_save_optim);
  EXPECT_FALSE(a.load);
  EXPECT_FALSE(a.finetune);
  EXPECT_FALSE(a.fp16);
  EXPECT_FALSE(a.bf16);
  EXPECT_FALSE(a.loss_scale);
  EXPECT_EQ(a.initial_loss_scale, 4294967296.0);
  EXPECT_EQ(a.min_loss_scale, 1.0);
  EXPECT_EQ(a.loss_scale_window, 1000.0);
  EXPECT_EQ(a.hysteresis, 2);
  EXPECT_TRUE(a.apply_query_key_layer_scaling);
  EXPECT_FALSE(a.attention_softmax_in_fp32);
  EXPECT_FALSE(a.fp16_lm_cross_entropy);
  EXPECT_EQ(a.tensor_model_parallel_size, 1);
  EXPECT_EQ(a.pipeline_model_parallel_size, 1);
  EXPECT_EQ(a.distributed_backend, "nccl");
  EXPECT_EQ(a.DDP_impl, "local");
  EXPECT_TRUE(a.scatter_gather_tensors_in_pipeline);
  EXPECT_FALSE(a.local_rank);
  EXPECT_EQ(a.eval_iters, 100);
  EXPECT_EQ(a.eval_interval, 1000);
  EXPECT_FALSE(a.data_path);
  EXPECT_FALSE(a.split);
  EXPECT_FALSE(a.seq_length);
  EXPECT_EQ(a.num_workers, 2);
  EXPECT_EQ(a.valid_num_workers, 2);
  EXPECT_EQ(a.data_impl, "infer");
  EXPECT_FALSE(a.reset_position_ids);
  EXPECT_FALSE(a.eod_mask_loss);
  EXPECT_EQ(a.tensorboard_log_interval, 1);
  EXPECT_EQ(a.tensorboard_queue_size, 1000);
  EXPECT_TRUE(a.log_learning_rate_to_tensorboard);
  EXPECT_TRUE(a.log_loss_scale_to_tensorboard);
  EXPECT_FALSE(a.zero_stage);
  EXPECT_EQ(a.remote_device, "none");
  EXPECT_EQ(a.tile_factor, 1);
  EXPECT_FALSE(a.deepspeed_activation_checkpointing);
  EXPECT_FALSE(a.deepspeed);
  EXPECT_FALSE(a.deepspeed_config);
  EXPECT_FALSE(a.metrics_file);
}

TEST_F(PretrainArgsTest, DerivedDefaults) {
  PretrainArgs a = parse(with(
      without(without(without(line(), "--split", 1), "--global-batch-size", 1), "--seq-length", 1),
      {"--encoder-seq-length", "128", "--bf16"}));
  write_file(config_, R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}})");
  validate_pretrain_args(a, ProcessEnv{});
  EXPECT_EQ(a.split, "969, 30, 1");
  EXPECT_EQ(a.global_batch_size, 4);  // b·D
  EXPECT_EQ(a.seq_length, 128);
  EXPECT_EQ(a.params_dtype, ParamsDtype::kBFloat16);
  EXPECT_TRUE(a.accumulate_allreduce_grads_in_fp32);
  EXPECT_TRUE(a.use_contiguous_buffers_in_ddp);
  // No gradient_clipping in the JSON: DeepSpeed does not clip, whatever --clip-grad says.
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find("sets no gradient_clipping, so gradients are not clipped"),
            std::string::npos);
}

TEST_F(PretrainArgsTest, ValuesAreReadAsPythonLiterals) {
  PretrainArgs a =
      parse(with(without(line(), "--train-iters", 1),
                 {"--train-samples", "220_000_000", "--seed", "042", "--min-lr", "1_0e-6",
                  "--hidden-dropout", " 0.25 ", "--num-layers", "6", "--lr", "inf", "--lr", "1e-3",
                  "--rampup-batch-size", "16", "16", "5_000_000"}));
  EXPECT_EQ(a.train_samples, 220000000);
  EXPECT_EQ(a.seed, 42);  // not octal
  EXPECT_EQ(a.min_lr, 1e-5);
  EXPECT_EQ(a.hidden_dropout, 0.25);
  EXPECT_EQ(a.num_layers, 6);  // a repeated flag: the last one wins
  EXPECT_EQ(a.lr, 1e-3);
  EXPECT_EQ(*a.rampup_batch_size, (std::vector<std::string>{"16", "16", "5_000_000"}));
}

TEST_F(PretrainArgsTest, NoteFlagsWithoutEffect) {
  write_file(config_, R"({"train_micro_batch_size_per_gpu": 4, "train_batch_size": 8,
                          "fp16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
  PretrainArgs a =
      parse(with(line(), {"--fp16", "--loss-scale", "12", "--hysteresis", "3", "--zero-stage", "1",
                          "--distributed-backend", "nccl", "--DDP-impl", "local",
                          "--reset-attention-mask", "--openai-gelu", "--train-tokens", "5"}));
  validate_pretrain_args(a, ProcessEnv{});
  const std::vector<std::string> expected = {
      "--clip-grad: not used in DeepSpeed mode, and " + config_ +
          " sets no gradient_clipping, so gradients are not clipped",
      "--loss-scale, --hysteresis: not used in DeepSpeed mode; loss scaling comes from the fp16 "
      "block of " +
          config_,
      "--zero-stage: not used by the DeepSpeed engine; zero_optimization of " + config_ +
          " decides (stage 1)",
      "--DDP-impl: only used by the Megatron-native path; no effect with --deepspeed",
      "--train-tokens: unused by GPT pretraining, as upstream",
      "--reset-attention-mask: no effect in DeepSpeed mode: the pipeline model always uses the "
      "causal mask",
      "--openai-gelu: no effect without --no-bias-gelu-fusion (the fused tanh GeLU is used)"};
  EXPECT_EQ(a.notes, expected);
  EXPECT_EQ(a.params_dtype, ParamsDtype::kFloat16);
}

struct Refusal {
  std::vector<std::string> args;
  std::string message;
};

TEST_F(PretrainArgsTest, RefusedFlagsExitWithTheirReason) {
  const std::vector<Refusal> refusals = {
      {{"--batch-size", "4"}, "--batch-size is no longer valid, use --micro-batch-size instead"},
      {{"--warmup", "10"}, "--warmup is no longer valid, use --lr-warmup-fraction instead"},
      {{"--model-parallel-size", "2"}, "--model-parallel-size is no longer valid"},
      {{"--fp32-residual-connection"}, "fp32 residual stream"},
      {{"--onnx-safe", "true"}, "ONNX"},
      {{"--use-bnb-optimizer"}, "bitsandbytes"},
      {{"--cpu-optimizer"}, "optimizer on the CPU"},
      {{"--cpu_torch_adam"}, "optimizer on the CPU"},
      {{"--inference"}, "inference mode"},
      {{"--partition-activations"}, "partitioned activation checkpoints"},
      {{"--contigious-checkpointing"}, "needs --partition-activations"},
      {{"--num-layers-per-virtual-pipeline-stage", "2"}, "interleaved schedule"},
      {{"--use-cpu-initialization"}, "on the CPU"},
      {{"--lazy-mpu-init", "1"}, "external DDP"},
      {{"--deepscale"}, "deprecated alias of --deepspeed"},
      {{"--deepscale_config", "x.json"}, "deprecated alias of --deepspeed_config"},
      {{"--loss-on-targets-only"}, "prefix-LM"},
      {{"--mask-prob", "0.2"}, "BERT/T5"},
      {{"--num-classes", "10"}, "ViT"},
      {{"--init-method-xavier-uniform"}, "ViT"},
      {{"--ict-load", "x"}, "biencoder"},
      {{"--adlr-autoresume"}, "autoresume"},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.args.front());
    EXPECT_EXIT(parse(with(line(), refusal.args)), ::testing::ExitedWithCode(2),
                "^pretrain: error: " + refusal.args.front() + ": .*" + refusal.message);
  }
}

TEST_F(PretrainArgsTest, BadValuesExitWithUsageErrors) {
  EXPECT_EXIT(parse(with(line(), {"--hidden-size", "0x10"})), ::testing::ExitedWithCode(2),
              "pretrain: error: .*invalid int value: '0x10'");
  EXPECT_EXIT(parse(with(line(), {"--lr", "fast"})), ::testing::ExitedWithCode(2),
              "pretrain: error: .*invalid float value: 'fast'");
  EXPECT_EXIT(parse(with(line(), {"--lr-decay-style", "inverse-square-root"})),
              ::testing::ExitedWithCode(2), "invalid choice: 'inverse-square-root'");
  EXPECT_EXIT(parse(with(line(), {"--position-embedding-type", "learned"})),
              ::testing::ExitedWithCode(2), "invalid choice: 'learned'");
  EXPECT_EXIT(parse(without(line(), "--num-layers", 1)), ::testing::ExitedWithCode(2),
              "pretrain: error: .*--num-layers is required");
  EXPECT_EXIT(parse(with(line(), {"--no-such-flag"})), ::testing::ExitedWithCode(2),
              "pretrain: error: .*no-such-flag");
  EXPECT_EXIT(parse(with(line(), {"--num-lay", "3"})), ::testing::ExitedWithCode(2),
              "pretrain: error: .*--num-lay");  // no abbreviations, as upstream
}

TEST_F(PretrainArgsTest, HelpMarksTheMdsAdditions) {
  FlagSet flags("pretrain", "test");
  PretrainArgs args;
  add_pretrain_flags(flags, args);
  const std::string help = flags.app().help();
  EXPECT_NE(help.find("mds additions (not upstream flags)"), std::string::npos);
  EXPECT_NE(help.find("--metrics-file"), std::string::npos);
  EXPECT_NE(help.find("Upstream flags this program refuses"), std::string::npos);
}

// An mds addition: off by default, and what the model options carry (the layers read it there).
TEST_F(PretrainArgsTest, CublasLtEpiloguesReachTheModelOptions) {
  const PretrainArgs plain = parse(line());
  EXPECT_FALSE(plain.cublaslt_epilogues);
  EXPECT_FALSE(train::model_options_from_args(plain, 50304).gemm_epilogues);
  const PretrainArgs asked = parse(with(line(), {"--cublaslt-epilogues"}));
  EXPECT_TRUE(asked.cublaslt_epilogues);
  EXPECT_TRUE(train::model_options_from_args(asked, 50304).gemm_epilogues);
}

// Upstream's store_true: the residual ordering reaches the model options (the layers read it
// there).
TEST_F(PretrainArgsTest, PostLayerNormResidualReachesTheModelOptions) {
  EXPECT_FALSE(train::model_options_from_args(parse(line()), 50304)
                   .apply_residual_connection_post_layernorm);
  const PretrainArgs asked = parse(with(line(), {"--apply-residual-connection-post-layernorm"}));
  EXPECT_TRUE(asked.apply_residual_connection_post_layernorm);
  EXPECT_TRUE(
      train::model_options_from_args(asked, 50304).apply_residual_connection_post_layernorm);
}

TEST_F(PretrainArgsTest, EmbedLayerNormReachesTheModelOptions) {
  EXPECT_FALSE(train::model_options_from_args(parse(line()), 50304).config.embed_layernorm);
  const PretrainArgs asked = parse(with(line(), {"--embed-layernorm"}));
  EXPECT_TRUE(asked.embed_layernorm);
  EXPECT_TRUE(train::model_options_from_args(asked, 50304).config.embed_layernorm);
}

// DeepSpeed's prescaling keys are accepted with a note saying what mds does instead.
TEST_F(PretrainArgsTest, PrescaleKeysGetANote) {
  const auto notes_for = [&](const std::string& json) {
    write_file(config_, json);
    PretrainArgs a = parse(line());
    validate_pretrain_args(a, ProcessEnv{});
    std::string all;
    for (const std::string& note : a.notes) all += note + "\n";
    return all;
  };
  const std::string base = R"({"train_micro_batch_size_per_gpu": 4, "train_batch_size": 8)";
  EXPECT_EQ(notes_for(base + "}").find("prescale_gradients"), std::string::npos);
  for (const std::string& key : {std::string(R"("prescale_gradients": true)"),
                                 std::string(R"("gradient_predivide_factor": 2.0)")}) {
    EXPECT_NE(notes_for(base + ", " + key + "}")
                  .find(config_ + ": prescale_gradients / gradient_predivide_factor are not "
                                  "implemented: mds divides"),
              std::string::npos)
        << key;
  }
}

// The notes say why a flag does nothing for the grid at hand, and stay silent where it acts.
TEST_F(PretrainArgsTest, GridFlagNotesFollowTheGrid) {
  const auto notes_for = [&](std::vector<std::string> extra, std::int64_t world) {
    PretrainArgs grid = parse(with(with(line(), {"--sync-tp-duplicated-parameters",
                                                 "--pp-partition-method", "type:transformer"}),
                                   extra));
    validate_pretrain_args(grid, ProcessEnv{0, world});
    std::string all;
    for (const std::string& note : grid.notes) all += note + "\n";
    return all;
  };
  const std::string one = notes_for({}, 1);
  EXPECT_NE(one.find("--sync-tp-duplicated-parameters: no effect with one tensor-parallel rank"),
            std::string::npos);
  EXPECT_NE(one.find("--pp-partition-method: no effect with one pipeline stage"),
            std::string::npos);
  const std::string grid =
      notes_for({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}, 4);
  EXPECT_NE(grid.find("--sync-tp-duplicated-parameters: no effect in mds: the parameters the "
                      "tensor-parallel ranks duplicate stay bit-identical"),
            std::string::npos);
  EXPECT_EQ(grid.find("one tensor-parallel rank"), std::string::npos);
  EXPECT_EQ(grid.find("--pp-partition-method"), std::string::npos);
}

// upstream's type=bool reads any non-empty word as True; mds reads the word.
TEST_F(PretrainArgsTest, EvalOnlyIsReadAsABoolean) {
  const auto evaluate_only = [&](std::vector<std::string> extra) {
    PretrainArgs a = parse(with(line(), extra));
    validate_pretrain_args(a, ProcessEnv{});
    return a.evaluate_only;
  };
  EXPECT_FALSE(evaluate_only({}));
  EXPECT_TRUE(evaluate_only({"--eval-only", "True"}));
  EXPECT_TRUE(evaluate_only({"--eval-only", "1"}));
  EXPECT_FALSE(evaluate_only({"--eval-only", "False"}));
  EXPECT_FALSE(evaluate_only({"--eval-only", "no"}));
  EXPECT_THROW(
      {
        try {
          evaluate_only({"--eval-only", "maybe"});
        } catch (const base::Error& e) {
          EXPECT_STREQ(e.what(), "--eval-only: expected True or False, got 'maybe'");
          throw;
        }
      },
      base::Error);
}

// nargs='+': the words as given (train::parse_skip_train_iteration_ranges reads them).
TEST_F(PretrainArgsTest, SkipRangesKeepTheirWords) {
  EXPECT_FALSE(parse(line()).skip_train_iteration_range);
  const PretrainArgs a = parse(with(line(), {"--skip-train-iteration-range", "30-40", "10-20"}));
  EXPECT_EQ(a.skip_train_iteration_range, (std::vector<std::string>{"30-40", "10-20"}));
}

// An mds addition: fp32 device GEMMs in TF32 only when asked (PyTorch's default since 1.12).
TEST_F(PretrainArgsTest, Tf32IsOffUnlessAsked) {
  EXPECT_FALSE(parse(line()).tf32);
  EXPECT_TRUE(parse(with(line(), {"--tf32"})).tf32);
}

// An mds addition: cuBLASLt's heuristic decides unless a tuning file is given.
TEST_F(PretrainArgsTest, GemmTuningFileIsOffUnlessGiven) {
  EXPECT_FALSE(parse(line()).gemm_tuning_file.has_value());
  EXPECT_EQ(parse(with(line(), {"--gemm-tuning-file", "/tmp/gemms.txt"})).gemm_tuning_file,
            "/tmp/gemms.txt");
}

// An mds addition: kernels time their same-bits launch shapes unless told to keep the defaults.
TEST_F(PretrainArgsTest, KernelShapesAreTimedUnlessFixed) {
  EXPECT_FALSE(parse(line()).fixed_kernel_shapes);
  EXPECT_TRUE(parse(with(line(), {"--fixed-kernel-shapes"})).fixed_kernel_shapes);
}

TEST_F(PretrainArgsTest, ValidationRefusals) {
  struct Case {
    std::vector<std::string> line;
    std::string message;
  };
  const std::vector<std::string> base = line();
  const std::vector<Case> cases = {
      {with(base, {"--tensor-model-parallel-size", "2"}),
       "the world size 1 is not divisible by --tensor-model-parallel-size 2 × "
       "--pipeline-model-parallel-size 1"},
      {with(base, {"--tensor-model-parallel-size", "0"}),
       "--tensor-model-parallel-size must be >= 1, got 0"},
      {with(base, {"--pipeline-model-parallel-size", "4"}),
       "the world size 1 is not divisible by --tensor-model-parallel-size 1 × "
       "--pipeline-model-parallel-size 4"},
      {with(base, {"--local_rank", "1"}), "--local_rank 1: a single process has local rank 0"},
      {with(base, {"--train-weighted-split-paths", "A: 1 0:1 x"}),
       "--data-path/--split (mode 1) and --(train|valid|test)-weighted-split-paths (mode 2) "
       "cannot be used together"},
      {without(without(base, "--data-path", 2), "--split", 1),
       "training data is required: give --data-path (or --train-weighted-split-paths)"},
      {with(base, {"--micro-batch-size", "0"}), "--micro-batch-size must be > 0, got 0"},
      {with(base, {"--fp16", "--bf16"}), "--fp16 and --bf16 cannot both be given"},
      {with(base, {"--bf16", "--DDP-impl", "torch"}),
       "--DDP-impl torch: fp32 gradient accumulation (forced by --bf16) needs --DDP-impl local"},
      {with(base, {"--train-samples", "100"}),
       "give one of --train-iters and --train-samples, not both"},
      {without(base, "--train-iters", 1),
       "the training length is required: give --train-iters or --train-samples"},
      {with(base, {"--lr-decay-samples", "10"}),
       "--lr-decay-samples needs sample-based training (--train-samples)"},
      {with(base, {"--lr-warmup-samples", "10"}),
       "--lr-warmup-samples needs sample-based training"},
      {with(base, {"--rampup-batch-size", "4", "4", "100"}),
       "--rampup-batch-size needs sample-based training (--train-samples)"},
      {with(base, {"--lr-warmup-fraction", "0.1"}),
       "give one of --lr-warmup-fraction and --lr-warmup-iters, not both"},
      {with(without(base, "--train-iters", 1), {"--train-samples", "100", "--lr-decay-iters", "5"}),
       "--lr-decay-iters needs iteration-based training (--train-iters)"},
      {with(without(without(base, "--train-iters", 1), "--lr-warmup-iters", 1),
            {"--train-samples", "100", "--lr-warmup-fraction", "0.1", "--lr-warmup-samples", "5"}),
       "give one of --lr-warmup-fraction and --lr-warmup-samples, not both"},
      {with(base, {"--hidden-size", "250"}),
       "--hidden-size 250 is not divisible by --num-attention-heads 4"},
      {with(base, {"--kv-channels", "32"}),
       "--kv-channels 32 differs from --hidden-size / --num-attention-heads = 64"},
      {with(base, {"--encoder-seq-length", "256"}),
       "give --seq-length or --encoder-seq-length, not both"},
      {without(base, "--seq-length", 1), "--seq-length is required"},
      {without(base, "--max-position-embeddings", 1),
       "--max-position-embeddings is required with --position-embedding-type absolute"},
      {with(base, {"--max-position-embeddings", "128"}),
       "--max-position-embeddings 128 is smaller than --seq-length 256"},
      {with(base, {"--position-embedding-type", "rotary"}),
       "--max-position-embeddings must not be given with --position-embedding-type rotary"},
      {with(without(base, "--max-position-embeddings", 1), {"--position-embedding-type", "rotary"}),
       "--position-embedding-type rotary: only absolute and alibi positions are implemented"},
      {with(base, {"--min-lr", "0.01"}), "--min-lr 0.01 is larger than --lr 0.0006"},
      {without(base, "--save-interval", 1), "--save needs --save-interval"},
      {with(base, {"--fp16-lm-cross-entropy"}), "--fp16-lm-cross-entropy needs --fp16"},
      {with(base, {"--distribute-checkpointed-activations"}),
       "--distribute-checkpointed-activations needs --checkpoint-activations"},
      {with(base, {"--glu-activation", "geglu"}),
       "--glu-activation needs --no-bias-gelu-fusion (as upstream)"},
      {with(base, {"--glu-activation", "swiglu", "--no-bias-gelu-fusion"}),
       "--glu-activation swiglu: GLU MLPs are not implemented in mds yet"},
      {without(base, "--deepspeed", 0),
       "--deepspeed is required: the Megatron-native path (training without --deepspeed) is not "
       "implemented in mds yet"},
      {without(base, "--deepspeed_config", 1), "--deepspeed needs --deepspeed_config"},
      {without(base, "--lr", 1), "--lr is required for training"},
      {with(base, {"--optimizer", "sgd"}), "--optimizer sgd is not implemented in mds yet"},
      {with(base, {"--dataloader-type", "cyclic"}), "--dataloader-type cyclic is not implemented"},
      {with(base, {"--zero-stage", "3"}), "--zero-stage 3 (building the model under ZeRO-3)"},
      {with(base, {"--tokenizer-type", "BertWordPieceCase"}),
       "--tokenizer-type BertWordPieceCase is not supported by pretrain"},
      {with(base, {"--log-interval", "0"}), "--log-interval must be > 0"},
      {with(base, {"--eval-interval", "0"}), "--eval-interval must be > 0"},
  };
  for (const Case& c : cases) {
    const std::string error = validation_error(c.line);
    EXPECT_NE(error.find(c.message), std::string::npos) << error << "\nexpected: " << c.message;
  }
  // Data parallelism (fp32, ZeRO 0) runs; a rank outside the world does not.
  EXPECT_EQ(validation_error(base, ProcessEnv{1, 2}), "no error");
  EXPECT_EQ(validation_error(base, ProcessEnv{2, 2}), "rank 2 is outside a world of 2 processes");
  // Tensor parallelism: the world holds whole TP groups, the rest is data parallelism.
  EXPECT_EQ(validation_error(with(base, {"--tensor-model-parallel-size", "2"}), ProcessEnv{1, 2}),
            "no error");
  EXPECT_EQ(validation_error(with(base, {"--tensor-model-parallel-size", "2"}), ProcessEnv{0, 3}),
            "the world size 3 is not divisible by --tensor-model-parallel-size 2 × "
            "--pipeline-model-parallel-size 1");
}

TEST_F(PretrainArgsTest, DeepSpeedCrossChecks) {
  const auto error_with = [&](const std::string& json, std::vector<std::string> extra = {}) {
    const std::string path = config_file("ds.json", json);
    return validation_error(with(line(), with({"--deepspeed_config", path}, extra)));
  };
  const std::string ds = dir_.file("ds.json");
  EXPECT_EQ(error_with(R"({"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8})"),
            ds + ": train_micro_batch_size_per_gpu is 2 but --micro-batch-size is 4");
  EXPECT_EQ(error_with(R"({"train_micro_batch_size_per_gpu": 4, "train_batch_size": 16})"),
            ds + ": train_batch_size is 16 but --global-batch-size is 8");
  EXPECT_EQ(error_with(R"({"train_batch_size": 8, "fp16": {"enabled": true}})"),
            ds + ": fp16.enabled is true but --fp16 is not given (megatron fp16 config does not "
                 "match deepspeed)");
  EXPECT_EQ(error_with(R"({"train_batch_size": 8})", {"--bf16"}),
            ds + ": bf16.enabled is false but --bf16 is given (megatron bf16 config does not "
                 "match deepspeed)");
  EXPECT_EQ(error_with(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
                            "zero_optimization": {"stage": 2}})"),
            "no error");
  EXPECT_NE(error_with(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})")
                .find("3 is not supported yet"),
            std::string::npos);
  EXPECT_NE(error_with(R"({"train_batch_size": 8, "no_such_key": 1})").find("no_such_key"),
            std::string::npos);
  EXPECT_NE(validation_error(with(line(), {"--deepspeed_config", dir_.file("missing.json")}))
                .find("missing.json"),
            std::string::npos);
}

TEST(PretrainProcessEnv, ReadsRankAndWorldSize) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  ProcessEnv env = process_env_from_environment();
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 8);
  ::setenv("WORLD_SIZE", "eight", 1);
  EXPECT_THROW(process_env_from_environment(), base::Error);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  env = process_env_from_environment();
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
}

}  // namespace
}  // namespace mds::config
