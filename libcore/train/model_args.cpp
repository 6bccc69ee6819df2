#include "train/model_args.h"

namespace mds::train {

model::ModelOptions model_options_from_args(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab) {
  model::ModelOptions options;
  model::GptConfig& config = options.config;
  config.num_layers = args.num_layers;
  config.hidden_size = args.hidden_size;
  config.num_attention_heads = args.num_attention_heads;
  config.ffn_hidden_size = args.ffn_hidden_size.value_or(4 * args.hidden_size);
  config.seq_length = *args.seq_length;
  config.max_position_embeddings = args.max_position_embeddings.value_or(*args.seq_length);
  config.padded_vocab_size = padded_vocab;
  config.init_method_std = args.init_method_std;
  config.embed_layernorm = args.embed_layernorm;
  switch (args.position_embedding_type) {
    case config::PositionEmbeddingType::kAbsolute:
      config.position_embedding = model::PositionEmbedding::kAbsolute;
      break;
    case config::PositionEmbeddingType::kRotary:
      config.position_embedding = model::PositionEmbedding::kRotary;
      break;
    case config::PositionEmbeddingType::kAlibi:
      config.position_embedding = model::PositionEmbedding::kAlibi;
      break;
  }
  // Upstream keeps the ALiBi tensor in params_dtype.
  options.alibi_bias_dtype = args.bf16   ? tensor::DType::kBFloat16
                             : args.fp16 ? tensor::DType::kFloat16
                                         : tensor::DType::kFloat32;
  options.layernorm_epsilon = static_cast<float>(args.layernorm_epsilon);
  // ParallelMLP: the fused bias-GeLU wins; --openai-gelu only replaces the unfused activation.
  options.gelu = args.bias_gelu_fusion ? ops::GeluKind::kTanhFused
                 : args.openai_gelu    ? ops::GeluKind::kTanhOpenAI
                                       : ops::GeluKind::kErf;
  options.apply_query_key_layer_scaling = args.apply_query_key_layer_scaling;
  options.apply_residual_connection_post_layernorm = args.apply_residual_connection_post_layernorm;
  options.hidden_dropout = static_cast<float>(args.hidden_dropout);
  options.attention_dropout = static_cast<float>(args.attention_dropout);
  options.checkpoint_activations = args.checkpoint_activations;
  options.checkpoint_num_layers = args.checkpoint_num_layers;
  if (args.deepspeed_configuration) {
    const std::int64_t interval =
        args.deepspeed_configuration->pipeline_activation_checkpoint_interval;
    if (interval > 0) options.checkpoint_num_layers = interval;
  }
  options.micro_batch_size = args.micro_batch_size;
  options.gemm_epilogues = args.cublaslt_epilogues;
  return options;
}

}  // namespace mds::train
