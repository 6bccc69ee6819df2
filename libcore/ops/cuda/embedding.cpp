#include "kernels/embedding.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void embedding_lookup(const DeviceContext& ctx, float* out, const std::int64_t* ids,
                      const float* table, std::int64_t n, std::int64_t h, std::int64_t rows,
                      std::int64_t vocab_start, bool add) {
  kernels::embedding_lookup(out, ids, table, n, h, rows, vocab_start, add, stream_of(ctx));
}

void embedding_backward(const DeviceContext& ctx, float* dtable, const float* dout,
                        const std::int64_t* ids, std::int64_t n, std::int64_t h, std::int64_t rows,
                        std::int64_t vocab_start) {
  const std::size_t bytes = kernels::embedding_backward_workspace_bytes(n, rows);
  void* workspace = ctx.cuda().scratch.reserve(bytes, stream_of(ctx));
  kernels::embedding_backward(dtable, dout, ids, n, h, rows, vocab_start, workspace, bytes,
                              stream_of(ctx));
}

}  // namespace mds::ops::cuda
