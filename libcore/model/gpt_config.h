#pragma once
#include <cstdint>

namespace mds::model {

// How positions enter the model (training.md §1.2, §1.4): only `kAbsolute` owns a parameter.
enum class PositionEmbedding : std::uint8_t { kAbsolute, kRotary, kAlibi };

// The shape of a GPTModelPipe and the slice of it one rank holds. Counts are the upstream
// arguments (--num-layers, --hidden-size, ...); the vocabulary is already padded.
struct GptConfig {
  std::int64_t num_layers = 0;           // L
  std::int64_t hidden_size = 0;          // h
  std::int64_t num_attention_heads = 0;  // n
  std::int64_t ffn_hidden_size = 0;      // F; 0 means the upstream default 4h
  std::int64_t seq_length = 0;           // s
  std::int64_t max_position_embeddings =
      0;  // must be >= s (checked for every position kind, as upstream)
  std::int64_t padded_vocab_size = 0;  // Vp
  PositionEmbedding position_embedding = PositionEmbedding::kAbsolute;
  bool embed_layernorm = false;           // --embed-layernorm (BLOOM)
  bool glu = false;                       // --glu-activation: dense_h_to_4h has 2F rows
  double init_method_std = 0.02;          // σ of --init-method-std
  std::int64_t tensor_parallel_size = 1;  // T
  std::int64_t tp_rank = 0;
  // The pipeline stage owns specs [stage_first_spec, stage_end_spec) of training.md §1.1;
  // -1 means "to the end", so the default is the whole model (P = 1).
  std::int64_t stage_first_spec = 0;
  std::int64_t stage_end_spec = -1;

  std::int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // This TP rank's share of the split dimensions (training.md §2.2).
  std::int64_t local_heads() const { return num_attention_heads / tensor_parallel_size; }
  std::int64_t local_hidden() const { return local_heads() * head_dim(); }  // attention width
  std::int64_t local_ffn() const { return ffn() / tensor_parallel_size; }
  std::int64_t local_vocab() const { return padded_vocab_size / tensor_parallel_size; }
  std::int64_t vocab_start() const { return tp_rank * local_vocab(); }
  std::int64_t first_local_head() const { return tp_rank * local_heads(); }
  // Spec indices of training.md §1.1 (transformer layer i is spec i+3).
  static constexpr std::int64_t kEmbeddingSpec = 1;
  static std::int64_t layer_spec(std::int64_t layer) { return layer + 3; }
  std::int64_t final_layernorm_spec() const { return num_layers + 4; }
  std::int64_t head_spec() const { return num_layers + 5; }
  // L+7 with the trailing fp32 cast; a stage range may end at either L+6 or L+7.
  std::int64_t max_spec_count() const { return num_layers + 7; }
  std::int64_t stage_end() const { return stage_end_spec < 0 ? max_spec_count() : stage_end_spec; }
  bool stage_owns(std::int64_t spec) const {
    return spec >= stage_first_spec && spec < stage_end();
  }
};

// Fails with a message naming the offending field and values when the configuration cannot
// describe a model (training.md §2.2 divisibility rules, positive sizes, a valid stage range).
void validate(const GptConfig& config);

}  // namespace mds::model
