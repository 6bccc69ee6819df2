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
  if (c.position_embedding != PositionEmbedding::kAbsolute) {
    base::fail(
        "GptModel: ", c.position_embedding == PositionEmbedding::kRotary ? "rotary" : "alibi",
        " position embeddings are not supported yet (only absolute)");
  }
  if (c.embed_layernorm) base::fail("GptModel: --embed-layernorm is not supported yet");
  if (c.glu) base::fail("GptModel: --glu-activation is not supported yet");
  if (!c.stage_owns(GptConfig::kEmbeddingSpec) || !c.stage_owns(c.head_spec())) {
    base::fail("GptModel: pipeline stages are not supported yet: the stage [", c.stage_first_spec,
               ", ", c.stage_end(), ") must hold the whole model");
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
}

}  // namespace mds::model
