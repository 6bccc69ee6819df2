// Network size, regularization, initialization and mixed-precision flags of `pretrain`.
#include "config/pretrain_flags.h"

namespace mds::config::pretrain_flags {
namespace {

void add_network_size(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Network size");
  g.integer("--num-layers", a.num_layers, "transformer layers (L)")->required();
  g.integer("--hidden-size", a.hidden_size, "hidden size (h)")->required();
  g.integer("--ffn-hidden-size", a.ffn_hidden_size, "MLP inner size (F); default 4h");
  g.integer("--num-attention-heads", a.num_attention_heads, "attention heads (n)")->required();
  g.integer("--kv-channels", a.kv_channels, "per-head size; default h/n (the only value mds runs)");
  g.integer("--max-position-embeddings", a.max_position_embeddings,
            "rows of the position table; must be >= --seq-length");
  g.real("--layernorm-epsilon", a.layernorm_epsilon, "LayerNorm epsilon");
  g.store_true("--sync-tp-duplicated-parameters", a.sync_tp_duplicated_parameters,
               "average TP-replicated parameters across TP ranks every forward");
  g.store_true("--openai-gelu", a.openai_gelu,
               "OpenAI's tanh GeLU constant (used only with --no-bias-gelu-fusion)");
  g.choice("--position-embedding-type", a.position_embedding_type, {"absolute", "rotary", "alibi"},
           "absolute, rotary or alibi (mds implements absolute and alibi; alibi on the CPU only)");
  g.choice("--glu-activation", a.glu_activation, {"geglu", "liglu", "reglu", "swiglu"},
           "GLU MLP activation (not implemented in mds yet)");
  g.text("--kill-switch-path", a.kill_switch_path,
         "save a checkpoint and exit when this file appears");
  g.choice("--log-level", a.log_level, {"debug", "info", "warning", "error", "critical", "passive"},
           "upstream's Python logging level of the main process (no effect in mds)");
  g.choice("--log-level-replica", a.log_level_replica,
           {"debug", "info", "warning", "error", "critical", "passive"},
           "upstream's Python logging level of the other processes (no effect in mds)");
  g.store_true("--apply-residual-connection-post-layernorm",
               a.apply_residual_connection_post_layernorm,
               "the residual adds take the LayerNorm's output instead of its input");
  g.store_true("--embed-layernorm", a.embed_layernorm,
               "a LayerNorm (eps 1e-5) over the summed word embeddings, before the positions "
               "(BLOOM)");
  g.refuse("--onnx-safe", "the ONNX-exporter GeLU workaround is not implemented", true);
  g.refuse("--bert-no-binary-head", "only used by BERT, not by GPT pretraining", false);
}

void add_regularization(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Regularization");
  g.real("--attention-dropout", a.attention_dropout, "dropout on attention probabilities");
  g.real("--hidden-dropout", a.hidden_dropout, "dropout on hidden states");
  g.real("--weight-decay", a.weight_decay, "decoupled (AdamW) weight decay");
  g.real("--clip-grad", a.clip_grad,
         "global-norm clipping (Megatron-native path; DeepSpeed reads gradient_clipping from "
         "its JSON)");
  g.real("--adam-beta1", a.adam_beta1, "Adam beta1");
  g.real("--adam-beta2", a.adam_beta2, "Adam beta2");
  g.real("--adam-eps", a.adam_eps, "Adam epsilon");
  g.real("--sgd-momentum", a.sgd_momentum, "SGD momentum (only with --optimizer sgd)");
}

void add_initialization(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Initialization");
  g.integer("--seed", a.seed, "seed of the weights, dropout and the dataset shuffle");
  g.real("--init-method-std", a.init_method_std, "std of the normal weight initialization");
  g.refuse("--init-method-xavier-uniform", "only used by ViT, not by GPT pretraining", false);
}

void add_mixed_precision(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Mixed precision");
  g.store_true("--fp16", a.fp16, "fp16 parameters and activations (must match the JSON)");
  g.store_true("--bf16", a.bf16, "bf16 parameters and activations (must match the JSON)");
  g.real("--loss-scale", a.loss_scale,
         "static loss scale (Megatron-native path; DeepSpeed reads its fp16 block)");
  g.real("--initial-loss-scale", a.initial_loss_scale, "Megatron-native path only");
  g.real("--min-loss-scale", a.min_loss_scale, "Megatron-native path only");
  g.real("--loss-scale-window", a.loss_scale_window, "Megatron-native path only");
  g.integer("--hysteresis", a.hysteresis, "Megatron-native path only");
  g.store_false("--no-query-key-layer-scaling", a.apply_query_key_layer_scaling,
                "do not scale Q·K^T by 1/layer-number (with fp32 softmax compensation)");
  g.store_true("--attention-softmax-in-fp32", a.attention_softmax_in_fp32,
               "softmax in fp32 (always so with query-key layer scaling)");
  g.store_true("--accumulate-allreduce-grads-in-fp32", a.accumulate_allreduce_grads_in_fp32,
               "Megatron-native path only (forced on by --bf16)");
  g.store_true("--fp16-lm-cross-entropy", a.fp16_lm_cross_entropy,
               "Megatron-native path only (needs --fp16)");
  g.refuse("--fp32-residual-connection", "an fp32 residual stream is not implemented in mds yet",
           false);
}

}  // namespace

void add_model_flags(FlagSet& flags, PretrainArgs& args) {
  add_network_size(flags, args);
  add_regularization(flags, args);
  add_initialization(flags, args);
  add_mixed_precision(flags, args);
}

}  // namespace mds::config::pretrain_flags
