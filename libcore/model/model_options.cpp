#include "model/model_options.h"

#include "base/error.h"

namespace mds::model {
namespace {

void check_probability(const char* field, float p) {
  if (!(p >= 0.0f && p < 1.0f)) base::fail("ModelOptions: ", field, " must be in [0, 1), got ", p);
}

}  // namespace

void validate(const ModelOptions& options) {
  const GptConfig& c = options.config;
  validate(c);
  if (c.position_embedding == PositionEmbedding::kRotary) {
    base::fail(
        "GptModel: rotary position embeddings are not supported yet (absolute and alibi are)");
  }
  if (c.glu) base::fail("GptModel: --glu-activation is not supported yet");
  // What passes between stages is always the residual stream [s, b, h]; a boundary that would
  // pass the raw batch (a stage of only the input cast), the final LayerNorm's output or the
  // logits is not implemented.
  const std::int64_t first = c.stage_first_spec, end = c.stage_end();
  if (!c.stage_owns(GptConfig::kEmbeddingSpec) && first < GptConfig::kEmbeddingSpec + 1) {
    base::fail("GptModel: pipeline stage [", first, ", ", end,
               ") holds only the input cast; the first stage must hold the embedding (spec ",
               GptConfig::kEmbeddingSpec, ")");
  }
  if (c.stage_owns(c.final_layernorm_spec()) != c.stage_owns(c.head_spec())) {
    base::fail("GptModel: pipeline stage [", first, ", ", end,
               ") splits the final LayerNorm (spec ", c.final_layernorm_spec(),
               ") from the head (spec ", c.head_spec(), "); they must be on one stage");
  }
  if (!c.stage_owns(c.head_spec()) && end > c.head_spec()) {
    base::fail("GptModel: pipeline stage [", first, ", ", end,
               ") holds only the output cast; the last stage must hold the head (spec ",
               c.head_spec(), ")");
  }
  if (!(options.layernorm_epsilon > 0.0f)) {
    base::fail("ModelOptions: layernorm_epsilon must be positive, got ", options.layernorm_epsilon);
  }
  check_probability("hidden_dropout", options.hidden_dropout);
  check_probability("attention_dropout", options.attention_dropout);
  if (options.checkpoint_num_layers < 1) {
    base::fail("ModelOptions: checkpoint_num_layers must be at least 1, got ",
               options.checkpoint_num_layers);
  }
  if (options.micro_batch_size < 1) {
    base::fail("ModelOptions: micro_batch_size must be at least 1, got ", options.micro_batch_size);
  }
  const tensor::DType dtype = options.activation_dtype;
  if (dtype != tensor::DType::kFloat32 && dtype != tensor::DType::kBFloat16 &&
      dtype != tensor::DType::kFloat16) {
    base::fail("ModelOptions: activation_dtype must be float32, bfloat16 or float16, got ",
               tensor::dtype_name(dtype));
  }
}

}  // namespace mds::model
