// The command line of `pretrain`: every flag upstream's pretrain_gpt.py accepts
// (megatron/arguments.py plus DeepSpeed's add_config_arguments, training.md §8), with upstream
// names and defaults, and the post-processing arguments.py applies before training. Flags mds does
// not implement are refused with a line naming the flag; flags that upstream accepts but ignores in
// DeepSpeed mode are accepted and reported in `notes`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/deepspeed_config.h"
#include "config/tokenizer_args.h"

namespace mds::config {

class FlagSet;

// megatron.enums.PositionEmbeddingType, with upstream's values (they are pickled in checkpoints).
enum class PositionEmbeddingType { kRotary = 1, kAbsolute = 2, kAlibi = 3 };
std::string_view to_string(PositionEmbeddingType type);

// args.params_dtype: torch.float / torch.half / torch.bfloat16.
enum class ParamsDtype { kFloat32, kFloat16, kBFloat16 };

// Fields are the argparse dests (flag names with '_'); std::nullopt where upstream's default is
// None. Fields marked "derived" are set by validate_pretrain_args, as arguments.py does.
struct PretrainArgs {
  // --- network size
  int64_t num_layers = 0;  // required
  int64_t hidden_size = 0;
  std::optional<int64_t> ffn_hidden_size;  // derived: 4h when not given
  int64_t num_attention_heads = 0;
  std::optional<int64_t> kv_channels;  // derived: h/n when not given
  std::optional<int64_t> max_position_embeddings;
  TokenizerArgs tokenizer;  // also --make-vocab-size-divisible-by, --pad-vocab-size-to
  double layernorm_epsilon = 1e-5;
  bool sync_tp_duplicated_parameters = false;
  bool openai_gelu = false;
  bool apply_residual_connection_post_layernorm = false;
  bool embed_layernorm = false;
  PositionEmbeddingType position_embedding_type = PositionEmbeddingType::kAbsolute;
  std::optional<std::string> glu_activation;  // refused by validation (not implemented)
  std::optional<std::string> kill_switch_path;
  std::optional<std::string> log_level;
  std::optional<std::string> log_level_replica;

  // --- regularization
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  double weight_decay = 0.01;
  double clip_grad = 1.0;  // native path only; DeepSpeed uses the JSON's gradient_clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;

  // --- training
  int64_t micro_batch_size = 0;              // required
  std::optional<int64_t> global_batch_size;  // derived: b·D when not given
  // The three words as given (upstream keeps the strings); train::parse_rampup_batch_size reads
  // them.
  std::optional<std::vector<std::string>> rampup_batch_size;
  // The ranges as given ("101-200"); train::parse_skip_train_iteration_ranges reads them.
  std::optional<std::vector<std::string>> skip_train_iteration_range;
  bool checkpoint_activations = false;
  bool distribute_checkpointed_activations = false;
  int64_t checkpoint_num_layers = 1;
  std::optional<int64_t> train_iters;
  std::optional<int64_t> train_samples;
  std::optional<int64_t> train_tokens;  // parsed but unused upstream
  int64_t log_interval = 100;
  std::optional<int64_t> exit_interval;
  std::optional<int64_t> exit_duration_in_mins;
  std::optional<std::string> eval_only;  // --eval-only VALUE as given (upstream's type=bool)
  bool evaluate_only = false;            // derived: the value read as a boolean
  std::optional<std::string> tensorboard_dir;
  bool masked_softmax_fusion = true;  // --no-masked-softmax-fusion
  bool bias_gelu_fusion = true;       // --no-bias-gelu-fusion: exact erf GeLU
  bool bias_dropout_fusion = true;    // --no-bias-dropout-fusion
  std::string optimizer = "adam";
  std::string dataloader_type = "single";  // upstream None, then 'single'
  std::optional<std::string> codecarbon_dir;
  bool abort_on_unmet_fused_kernel_constraints = false;
  std::optional<std::string> pp_partition_method;

  // --- initialization
  int64_t seed = 1234;
  double init_method_std = 0.02;

  // --- learning rate (train::LrFlags is built from these)
  std::optional<double> lr;
  std::string lr_decay_style = "linear";  // constant | linear | cosine
  std::optional<int64_t> lr_decay_iters;
  std::optional<int64_t> lr_decay_samples;
  std::optional<int64_t> lr_decay_tokens;
  std::optional<double> lr_warmup_fraction;
  int64_t lr_warmup_iters = 0;
  int64_t lr_warmup_samples = 0;
  double min_lr = 0.0;
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
  bool universal_checkpoint = false;

  // --- checkpointing (the no_* flags are None upstream unless given)
  std::optional<std::string> save;
  std::optional<int64_t> save_interval;
  bool no_save_optim = false;
  bool no_save_rng = false;
  std::optional<std::string> load;
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool finetune = false;

  // --- mixed precision (the loss-scale flags are native-path only)
  bool fp16 = false;
  bool bf16 = false;
  std::optional<double> loss_scale;
  double initial_loss_scale = 4294967296.0;  // 2**32
  double min_loss_scale = 1.0;
  double loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool apply_query_key_layer_scaling = true;  // --no-query-key-layer-scaling
  bool attention_softmax_in_fp32 = false;
  bool accumulate_allreduce_grads_in_fp32 = false;  // derived: forced on by --bf16
  bool fp16_lm_cross_entropy = false;

  // --- distributed
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  std::string distributed_backend = "nccl";
  std::string DDP_impl = "local";
  bool use_contiguous_buffers_in_ddp = false;  // derived: forced on with fp32 grad accumulation
  bool scatter_gather_tensors_in_pipeline = true;
  std::optional<int64_t> local_rank;

  // --- validation
  int64_t eval_iters = 100;
  int64_t eval_interval = 1000;

  // --- data
  std::optional<std::vector<std::string>> data_path;  // PREFIX or W1 PREFIX1 W2 PREFIX2 ...
  std::optional<std::string> split;                   // derived: "969, 30, 1" with --data-path
  std::optional<std::vector<std::string>> train_weighted_split_paths;  // mode 2 group strings
  std::optional<std::vector<std::string>> valid_weighted_split_paths;
  std::optional<std::vector<std::string>> test_weighted_split_paths;
  std::optional<std::string> train_weighted_split_paths_path;  // a file holding the strings
  std::optional<std::string> valid_weighted_split_paths_path;
  std::optional<std::string> test_weighted_split_paths_path;
  std::optional<std::string> log_path;
  std::optional<int64_t> seq_length;          // derived from --encoder-seq-length when not given
  std::optional<int64_t> encoder_seq_length;  // derived: = seq_length
  bool mmap_warmup = false;
  int64_t num_workers = 2;
  int64_t valid_num_workers = 2;
  std::string data_impl = "infer";  // lazy | cached | mmap | infer
  bool reset_position_ids = false;
  bool reset_attention_mask = false;  // no effect in DeepSpeed mode (noted)
  bool eod_mask_loss = false;

  // --- logging
  bool log_params_norm = false;
  bool log_num_zeros_in_grad = false;
  int64_t tensorboard_log_interval = 1;
  int64_t tensorboard_queue_size = 1000;
  bool log_timers_to_tensorboard = false;
  bool log_batch_size_to_tensorboard = false;
  bool log_learning_rate_to_tensorboard = true;  // --no-log-learnig-rate-to-tensorboard (sic)
  bool log_loss_scale_to_tensorboard = true;
  bool log_validation_ppl_to_tensorboard = false;

  // --- ZeRO, Megatron side (unused by the DeepSpeed engine; the JSON decides)
  std::optional<int64_t> zero_stage;  // upstream default is the float 1.0
  bool zero_reduce_scatter = false;
  bool zero_contigious_gradients = false;
  std::optional<int64_t> zero_reduce_bucket_size;     // upstream default 0.0
  std::optional<int64_t> zero_allgather_bucket_size;  // upstream default 0.0
  std::string remote_device = "none";
  bool use_pin_memory = false;

  // --- memory optimizations (not used by GPTModelPipe)
  bool scattered_embeddings = false;
  bool split_transformers = false;
  bool memory_centric_tiled_linear = false;
  int64_t tile_factor = 1;

  // --- activation checkpointing (DeepSpeed)
  bool deepspeed_activation_checkpointing = false;
  bool checkpoint_in_cpu = false;
  bool synchronize_each_layer = false;
  bool profile_backward = false;

  // --- DeepSpeed
  bool deepspeed = false;
  bool deepspeed_mpi = false;  // accepted: the launch is always read from the environment
  std::optional<std::string> deepspeed_config;

  // --- mds additions (not upstream flags)
  std::optional<std::string> metrics_file;  // --metrics-file: JSON-lines training metrics
  // --device: auto | cpu | cuda[:N] (train/device_choice.h); when not given, $MDS_DEVICE, else
  // auto.
  std::string device = "auto";
  bool cublaslt_epilogues = false;  // --cublaslt-epilogues (ModelOptions)
  bool tf32 = false;                // --tf32: fp32 GEMMs on a CUDA device in TF32
  // --gemm-tuning-file: a CUDA device's GEMM algorithm choices (ops::DeviceContext::tune_gemms);
  // each rank of several keeps its own, "<path>.rank<N>".
  std::optional<std::string> gemm_tuning_file;
  // --fixed-kernel-shapes: a CUDA device's kernels keep their default launch shapes instead of
  // timing the same-bits alternatives on first use (ops::DeviceContext::time_kernel_shapes).
  bool fixed_kernel_shapes = false;

  // --- derived by validate_pretrain_args
  int64_t rank = 0;        // $RANK
  int64_t world_size = 1;  // $WORLD_SIZE
  int64_t data_parallel_size = 1;
  ParamsDtype params_dtype = ParamsDtype::kFloat32;
  std::optional<DeepSpeedConfig> deepspeed_configuration;  // the loaded --deepspeed_config
  BatchSizes deepspeed_batch;  // the JSON's batch sizes, resolved for data_parallel_size
  // Upstream flags given on the command line that have no effect here (as upstream in DeepSpeed
  // mode); the program prints them.
  std::vector<std::string> notes;

  // Long names ("--lr") of the flags given on the command line, in registration order.
  std::vector<std::string> given_flags;
  bool was_given(std::string_view flag) const;
  // "name = value" lines of every flag after parsing (FlagSet::resolved_arguments).
  std::string resolved_arguments;
};

// Registers every pretrain flag on `flags`, bound to `args` (which must outlive the parse).
void add_pretrain_flags(FlagSet& flags, PretrainArgs& args);

// Parses the command line; --help prints help and exits 0, a bad command line (unknown flag, bad
// value, a flag mds refuses) prints one "pretrain: error: ..." line and exits 2. Does not validate.
PretrainArgs parse_pretrain_args(int argc, char** argv);

// The process layout from the launcher's environment (upstream reads $RANK and $WORLD_SIZE).
struct ProcessEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
};
ProcessEnv process_env_from_environment();

// arguments.py's post-processing and checks for one process, then mds's own refusals and the
// DeepSpeed JSON cross-checks (training.md §7). Fills the derived fields and `notes`; a violated
// rule is a base::Error naming the flag(s) (or the JSON file and key).
void validate_pretrain_args(PretrainArgs& args, const ProcessEnv& env);
void validate_pretrain_args(PretrainArgs& args);  // with process_env_from_environment()
// The model-shape part of it (layers, widths, heads, sequence and position lengths, position
// embedding type), filling the derived sizes; also what evaluate and generate check.
void validate_model_shape(PretrainArgs& args);

}  // namespace mds::config
