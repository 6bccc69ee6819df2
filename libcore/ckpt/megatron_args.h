// The `args` entry of upstream checkpoints (checkpoints.md §1.2): the argparse.Namespace that
// megatron/arguments.py builds, with the attributes the tokenizer, trainer and DeepSpeed add
// later, in upstream's attribute order; and the load-time comparison of a saved one with the
// current command line (megatron/checkpointing.py check_checkpoint_args).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/pretrain_args.h"
#include "io/pickle_value.h"
#include "train/skip_ranges.h"

namespace mds::ckpt {

// Values upstream adds to `args` while running rather than while parsing.
struct MegatronRunValues {
  int64_t padded_vocab_size = 0;  // the tokenizer's vocabulary after padding (Vp)
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t consumed_train_tokens = 0;
  double gigaflos_no_embeds = 0.0;  // saved as the int 0 until it grows, as upstream
  // With --train-samples: the iteration count update_train_iters derived (None until known).
  std::optional<int64_t> train_iters;
  double parameters_in_billions_no_embedding = 0.0;
  bool do_train = true;
  bool do_valid = true;
  bool do_test = true;
  // --skip-train-iteration-range: the ranges not yet reached, saved as upstream's deque of
  // [start, end] lists; None without the flag.
  std::optional<std::vector<train::IterationRange>> skip_train_iteration_range;
};

// The Namespace for a validated `args` (validate_pretrain_args has run, so the DeepSpeed JSON is
// loaded). Every argparse dest of pretrain_gpt.py's parser is present, with upstream's default for
// flags mds refuses; params_dtype is a torch dtype global, position_embedding_type a
// megatron.enums.PositionEmbeddingType member, deepspeed_configuration the JSON as a dict. The mds
// additions (--metrics-file, --tokenizer-model) are left out. The
// --*-weighted-split-paths-path files are read again here, as upstream's parser reads them.
io::Value megatron_args_namespace(const config::PretrainArgs& args, const MegatronRunValues& run);

// Fails when a saved Namespace describes a different model than the current command line:
// num_layers, hidden_size, num_attention_heads, position_embedding_type, max_position_embeddings
// (not for alibi), with a vocab file also make_vocab_size_divisible_by, padded_vocab_size and
// tokenizer_type, and the tensor/pipeline sizes (checkpoint_version < 3: the saved
// model_parallel_size against the tensor size). Skipped with --universal-checkpoint, as upstream.
// Beyond upstream: apply_residual_connection_post_layernorm where the saved args have it (the
// same weights compute another model under the other ordering, which upstream loads silently),
// and embed_layernorm (upstream fails later, on the missing or unexpected norm parameters).
// Messages: "checkpoint ckpt/iter_0000010: num_layers is 4 in the checkpoint but 2 on the command
// line".
void check_checkpoint_args(const io::ValueRef& saved_args, const config::PretrainArgs& current,
                           int64_t padded_vocab_size, const std::string& checkpoint,
                           double checkpoint_version = 3.0);

// megatron.enums.PositionEmbeddingType as a saved Namespace holds it: pickled by Python < 3.11
// (PositionEmbeddingType(2)) or >= 3.11 (getattr(PositionEmbeddingType, "absolute")); nullopt for
// anything else.
std::optional<config::PositionEmbeddingType> saved_position_embedding_type(const io::Value& v);

}  // namespace mds::ckpt
