#pragma once
#include <cstdint>

#include "model/gpt_config.h"
#include "ops/gelu.h"
#include "tensor/dtype.h"

namespace mds::model {

// Everything besides the parameter shapes that decides what one micro-batch computes: the
// upstream flags of training.md §1.3–§1.6 and §6, with their upstream defaults.
struct ModelOptions {
  GptConfig config;  // the whole model, or this rank's TP shard of it and pipeline stage
  float layernorm_epsilon = 1e-5f;
  ops::GeluKind gelu = ops::GeluKind::kTanhFused;
  bool apply_query_key_layer_scaling =
      true;  // coeff = max(1, layer_number), 0-based (GPTModelPipe)
  bool apply_residual_connection_post_layernorm = false;
  float hidden_dropout = 0.1f;  // embedding dropout and both residual-branch dropouts
  float attention_dropout = 0.1f;
  bool checkpoint_activations = false;  // --checkpoint-activations: keep only each chunk's input,
  std::int64_t checkpoint_num_layers = 1;  // recompute the chunk's forward inside its backward
  std::int64_t micro_batch_size = 1;       // b; sequence length is config.seq_length
  // The dtype of the activations and their gradients: float32, or bfloat16/float16 as upstream's
  // --bf16/--fp16 on a GPU (the ops compute in fp32 and round each output once). LayerNorm
  // statistics, attention probabilities/lse, logits and losses stay fp32 whatever it is.
  tensor::DType activation_dtype = tensor::DType::kFloat32;
  // mds's --cublaslt-epilogues: on a CUDA device with 16-bit activations, fc1's bias and GeLU
  // run in its GEMM's epilogue with cuBLASLt's own tanh GeLU (ops/gelu_epilogues.h) instead of
  // ops::bias_gelu_forward; the backward is the GeLU kernel's at the kept input.
  bool gemm_epilogues = false;
  // With ALiBi positions: the params dtype upstream keeps its bias tensor in (fp32, bf16 or fp16;
  // model/alibi.h), whatever dtype the activations have.
  tensor::DType alibi_bias_dtype = tensor::DType::kFloat32;
};

// Fails with the offending field when the options are invalid, or name a feature the model does
// not implement yet (rotary/ALiBi positions, embedding LayerNorm, GLU, a stage boundary that
// does not pass the residual stream).
void validate(const ModelOptions& options);

}  // namespace mds::model
