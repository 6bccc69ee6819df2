#pragma once
#include <cstdint>

#include "ops/dropout.h"

namespace mds::model {

// Which dropout masks a micro-batch uses. Counter-based (architecture.md §5): the Philox stream of
// each dropout site is derived from (seed, iteration, micro_batch, layer, site), so recomputation
// and resume replay identical masks and nothing depends on how many ops ran before.
struct DropoutContext {
  std::uint64_t seed = 1234;
  std::uint64_t iteration = 0;
  std::uint64_t micro_batch = 0;
  bool training = true;  // false: no dropout at all (evaluation)
};

// The three dropout sites of a transformer layer (training.md §1.3, §1.4).
enum class DropoutSite : std::uint8_t {
  kAttentionProbs = 0,     // attention-probability dropout (attention_dropout)
  kAttentionResidual = 1,  // bias-dropout-add after the attention dense (hidden_dropout)
  kMlpResidual = 2,        // bias-dropout-add after dense_4h_to_h (hidden_dropout)
};

// Streams are laid out so that no two (seed, iteration, micro_batch, site) share a Philox
// counter: key = seed | iteration << 32, offset = site | micro_batch << 32 with site 0 the
// embedding and 1 + 3·layer + DropoutSite for the layers (bits 24–31 stay free for a TP-region
// rank). Bit 63 of the offset is never set, leaving that half of the counter space to parameter
// initialization (model/init.h). Fields too large for their bits fail with the field's name.
// With training off or p = 0 the stream has p = 0 (the dropout ops then copy).
ops::DropoutStream embedding_dropout_stream(const DropoutContext& context, float p);
ops::DropoutStream layer_dropout_stream(const DropoutContext& context, float p, std::int64_t layer,
                                        DropoutSite site);

}  // namespace mds::model
