#include "kernels/embedding.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void embedding_lookup(const DeviceContext& ctx, void* out, const std::int64_t* ids,
                      const void* table, tensor::DType dtype, tensor::DType table_dtype,
                      std::int64_t n, std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                      bool add) {
  kernels::embedding_lookup(out, ids, table, dtype, table_dtype, n, h, rows, vocab_start, add,
                            stream_of(ctx));
}

void embedding_forward(const DeviceContext& ctx, void* out, const std::int64_t* tokens,
                       const void* wte, const std::int64_t* positions, const void* wpe,
                       tensor::DType dtype, tensor::DType table_dtype, std::int64_t n,
                       std::int64_t h) {
  kernels::embedding_forward(out, tokens, wte, positions, wpe, dtype, table_dtype, n, h,
                             stream_of(ctx));
}

void embedding_backward(const DeviceContext& ctx, float* dtable, const void* dout,
                        tensor::DType dtype, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start) {
  const std::size_t bytes = kernels::embedding_backward_workspace_bytes(n, rows);
  void* workspace = ctx.cuda().scratch.reserve(bytes, stream_of(ctx));
  kernels::embedding_backward(dtable, dout, dtype, ids, n, h, rows, vocab_start, workspace, bytes,
                              stream_of(ctx));
}

}  // namespace mds::ops::cuda
