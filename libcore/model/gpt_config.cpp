#include "model/gpt_config.h"

#include "base/error.h"

namespace mds::model {
namespace {

void require_positive(const char* field, std::int64_t value) {
  if (value <= 0) base::fail("GptConfig: ", field, " must be positive, got ", value);
}

}  // namespace

void validate(const GptConfig& c) {
  require_positive("num_layers", c.num_layers);
  require_positive("hidden_size", c.hidden_size);
  require_positive("num_attention_heads", c.num_attention_heads);
  require_positive("seq_length", c.seq_length);
  require_positive("max_position_embeddings", c.max_position_embeddings);
  require_positive("padded_vocab_size", c.padded_vocab_size);
  require_positive("tensor_parallel_size", c.tensor_parallel_size);
  if (c.ffn_hidden_size < 0) {
    base::fail("GptConfig: ffn_hidden_size must be positive (or 0 for 4h), got ",
               c.ffn_hidden_size);
  }
  if (!(c.init_method_std > 0.0)) {
    base::fail("GptConfig: init_method_std must be positive, got ", c.init_method_std);
  }
  const std::int64_t t = c.tensor_parallel_size;
  if (c.tp_rank < 0 || c.tp_rank >= t) {
    base::fail("GptConfig: tp_rank ", c.tp_rank, " is outside [0, ", t, ")");
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    base::fail("GptConfig: hidden_size ", c.hidden_size,
               " is not divisible by num_attention_heads ", c.num_attention_heads);
  }
  // Whole heads per TP rank (the fused QKV split, training.md §1.4); h % T then follows.
  if (c.num_attention_heads % t != 0) {
    base::fail("GptConfig: num_attention_heads ", c.num_attention_heads,
               " is not divisible by tensor_parallel_size ", t);
  }
  if (c.ffn() % t != 0) {
    base::fail("GptConfig: ffn_hidden_size ", c.ffn(), " is not divisible by tensor_parallel_size ",
               t);
  }
  if (c.padded_vocab_size % t != 0) {
    base::fail("GptConfig: padded_vocab_size ", c.padded_vocab_size,
               " is not divisible by tensor_parallel_size ", t);
  }
  if (c.position_embedding == PositionEmbedding::kRotary && c.head_dim() % 2 != 0) {
    base::fail("GptConfig: rotary positions need an even head dim, got ", c.head_dim());
  }
  if (c.max_position_embeddings < c.seq_length) {
    base::fail("GptConfig: max_position_embeddings ", c.max_position_embeddings,
               " is below seq_length ", c.seq_length);
  }
  const std::int64_t end = c.stage_end();
  if (c.stage_first_spec < 0 || end <= c.stage_first_spec || end > c.max_spec_count()) {
    base::fail("GptConfig: stage spec range [", c.stage_first_spec, ", ", end,
               ") is not inside [0, ", c.max_spec_count(), ")");
  }
}

}  // namespace mds::model
