// The decoding loop of upstream's sample_sequence_batch (data.md §7.2) over a batch of contexts
// with a KV cache: the shared prefix (up to the shortest context) is fed at once, then one position
// per step for every row; a row still inside its own context keeps its context token.
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/gpt_inference.h"
#include "tasks/sampling.h"

namespace mds::tasks {

struct GenerationRow {
  std::vector<std::int64_t> context;  // at least one token
  std::uint64_t stream = 0;           // the sampler stream (e.g. the sample's index)
};

struct GenerationResult {
  std::vector<std::int64_t> tokens;  // context + generated, the EOD included when one came
  std::int64_t context_length = 0;
  bool finished = false;  // ended with the EOD token
  std::int64_t generated() const {
    return static_cast<std::int64_t>(tokens.size()) - context_length - (finished ? 1 : 0);
  }
};

struct GenerationOptions {
  SamplingOptions sampling;
  std::uint64_t seed = 1234;
  std::int64_t seq_length = 0;      // positions available in total
  std::int64_t out_seq_length = 0;  // most new tokens per row
  std::int64_t eod = 0;
  // Ids at or above this are never chosen (the padding rows of the vocabulary, which cannot be
  // detokenized).
  std::int64_t vocab_size = 0;
  bool recompute = false;  // feed the whole prefix every step instead of using the cache
};

// Generates for every row until it produces EOD, has out_seq_length new tokens, or fills
// seq_length positions. Contexts must be shorter than seq_length. In a T × P grid every rank calls
// this together with the same rows: the head rank (model.comms()) samples from the logits and
// every rank takes its tokens, so all return the same results.
std::vector<GenerationResult> generate(const GptInference& model,
                                       const std::vector<GenerationRow>& rows,
                                       const GenerationOptions& options);

}  // namespace mds::tasks
