// merge-mp-partitions --from-hf: a Hugging Face GPT-2 folder (config.json, model.safetensors;
// checkpoints.md §6) written as the weights-only DeepSpeed checkpoint of a T × P run, so that
// pretrain --finetune, evaluate and generate start from real GPT-2 weights.
#pragma once

#include "base/log.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/reshard_args.h"

namespace mds::ckpt {

// The model flags a GPT-2 config.json implies: each shape flag not given on the command line is
// taken from it (--num-layers from n_layer, --hidden-size from n_embd, --num-attention-heads from
// n_head, --ffn-hidden-size from n_inner, --max-position-embeddings and --seq-length from
// n_positions, --layernorm-epsilon from layer_norm_epsilon); a given one must agree. The GeLU of
// the flags must be the config's (erf for "gelu", a tanh form for the others): a different tanh
// form only rounds differently and is accepted. Errors name the file, key and flag.
void apply_hf_config_to_flags(const HfGpt2Config& hf, const std::string& path,
                              config::PretrainArgs& args);

// Reads --from-hf, fills the model flags from its config.json, pads its vocabulary for
// --target-tensor-model-parallel-size as Megatron pads the tokenizer's, and writes
// <save>/global_step0 and <save>/latest at the target TP × PP grid (in --bf16/--fp16 when given,
// else config.json's torch_dtype). Any bad input is a base::Error naming the file or flag, with
// nothing written.
void import_hf_gpt2(MergeMpArgs& args, const base::Log& log);

}  // namespace mds::ckpt
