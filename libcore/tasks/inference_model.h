// A GPT model for inference: the shape the command line describes (as upstream, the model flags
// must match the checkpoint) with the weights of the checkpoint in --load, as fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/log.h"
#include "config/pretrain_args.h"
#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "text/tokenizer.h"

namespace mds::tasks {

struct InferenceModel {
  model::ModelOptions options;  // dropout 0, no recomputation
  std::unique_ptr<model::ParamTable> table;
  std::unique_ptr<model::ParamBuffer> params;  // fp32 (16-bit checkpoints are widened)
  std::int64_t vocab_size = 0;                 // the tokenizer's, before padding
  std::string checkpoint;                      // <load>/<tag>
};

// The model options of validated args (tasks::validate_inference_args) and a padded vocabulary.
model::ModelOptions inference_model_options(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab);

// Reads <args.load>/latest and the checkpoint it names (DeepSpeed pipeline layout of one rank,
// as pretrain --save writes it), weights only: no optimizer state, no RNG. The saved args must
// describe the same model as the command line. A missing folder, `latest` file or tensor fails
// with one line naming it.
InferenceModel load_inference_model(const config::PretrainArgs& args,
                                    const text::Tokenizer& tokenizer, const base::Log& log);

}  // namespace mds::tasks
