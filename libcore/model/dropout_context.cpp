#include "model/dropout_context.h"

#include "base/error.h"

namespace mds::model {
namespace {

constexpr std::uint64_t kSiteLimit = std::uint64_t{1} << 24;
constexpr std::uint64_t kMicroBatchLimit = std::uint64_t{1} << 31;
constexpr std::uint64_t kWord = std::uint64_t{1} << 32;

ops::DropoutStream stream_for(const DropoutContext& context, float p, std::uint64_t site) {
  if (context.seed >= kWord) {
    base::fail("DropoutContext: seed ", context.seed, " does not fit in 32 bits");
  }
  if (context.iteration >= kWord) {
    base::fail("DropoutContext: iteration ", context.iteration, " does not fit in 32 bits");
  }
  if (context.micro_batch >= kMicroBatchLimit) {
    base::fail("DropoutContext: micro_batch ", context.micro_batch, " does not fit in 31 bits");
  }
  if (site >= kSiteLimit) base::fail("DropoutContext: dropout site ", site, " exceeds 2^24");
  ops::DropoutStream stream;
  stream.p = context.training ? p : 0.0f;
  stream.seed = context.seed | context.iteration << 32;
  stream.offset = site | context.micro_batch << 32;
  return stream;
}

}  // namespace

ops::DropoutStream embedding_dropout_stream(const DropoutContext& context, float p) {
  return stream_for(context, p, 0);
}

ops::DropoutStream layer_dropout_stream(const DropoutContext& context, float p, std::int64_t layer,
                                        DropoutSite site) {
  if (layer < 0) base::fail("DropoutContext: negative layer ", layer);
  return stream_for(context, p,
                    1 + 3 * static_cast<std::uint64_t>(layer) + static_cast<std::uint64_t>(site));
}

}  // namespace mds::model
