#include <bit>
#include <cub/device/device_radix_sort.cuh>

#include "base/error.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/embedding.h"
#include "kernels/embedding_kernels.cuh"
#include "kernels/launch.cuh"
#include "kernels/scratch.h"

namespace mds::kernels {

namespace {

using detail::launch;
using namespace embedding_detail;

constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Bits the keys 0..rows need (rows itself is the out-of-shard key).
int key_bits(std::int64_t rows) {
  return std::bit_width(static_cast<std::uint64_t>(rows));
}

void check_sizes(std::int64_t n, std::int64_t rows) {
  if (n >= (std::int64_t{1} << 31) || rows >= (std::int64_t{1} << 31) - 1) {
    base::fail("cuda: kernels::embedding_backward: ", n, " tokens or ", rows,
               " rows exceed 2^31 − 1");
  }
}

// Workspace: keys, sorted keys, tokens, sorted tokens (n uint32 each), then CUB's scratch.
struct Workspace {
  std::uint32_t* keys;
  std::uint32_t* sorted_keys;
  std::uint32_t* tokens;
  std::uint32_t* sorted_tokens;
  void* cub;
  std::size_t cub_bytes;
};

std::size_t cub_bytes(std::int64_t n, std::int64_t rows) {
  std::size_t bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(
                 nullptr, bytes, static_cast<std::uint32_t*>(nullptr),
                 static_cast<std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
                 static_cast<std::uint32_t*>(nullptr), static_cast<int>(n), 0, key_bits(rows)),
             "kernels::embedding_backward (sort workspace size)");
  return bytes;
}

Workspace carve(void* base, std::int64_t n) {
  const std::size_t array = aligned(static_cast<std::size_t>(n) * sizeof(std::uint32_t));
  auto* bytes = static_cast<char*>(base);
  return {reinterpret_cast<std::uint32_t*>(bytes),
          reinterpret_cast<std::uint32_t*>(bytes + array),
          reinterpret_cast<std::uint32_t*>(bytes + 2 * array),
          reinterpret_cast<std::uint32_t*>(bytes + 3 * array),
          bytes + 4 * array,
          0};
}

std::size_t workspace_bytes(std::int64_t n, std::int64_t rows) {
  return 4 * aligned(static_cast<std::size_t>(n) * sizeof(std::uint32_t)) + cub_bytes(n, rows);
}

}  // namespace

void embedding_lookup(void* out, const std::int64_t* ids, const void* table, tensor::DType dtype,
                      tensor::DType table_dtype, std::int64_t n, std::int64_t h, std::int64_t rows,
                      std::int64_t vocab_start, bool add, cudaStream_t stream) {
  detail::with_storages(dtype, table_dtype, "embedding_lookup", [&](auto s, auto p) {
    if (n <= 0 || h <= 0) return;
    launch("kernels::embedding_lookup", lookup_kernel<decltype(s)::value, decltype(p)::value>,
           token_shape(n, "kernels::embedding_lookup"), stream, out, ids, table, h, rows,
           vocab_start, add);
  });
}

void embedding_lookup(void* out, const std::int64_t* ids, const float* table, tensor::DType dtype,
                      std::int64_t n, std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                      bool add, cudaStream_t stream) {
  embedding_lookup(out, ids, table, dtype, tensor::DType::kFloat32, n, h, rows, vocab_start, add,
                   stream);
}

void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add,
                      cudaStream_t stream) {
  embedding_lookup(out, ids, table, tensor::DType::kFloat32, n, h, rows, vocab_start, add, stream);
}

void embedding_forward(void* out, const std::int64_t* tokens, const void* wte,
                       const std::int64_t* positions, const void* wpe, tensor::DType dtype,
                       tensor::DType table_dtype, std::int64_t n, std::int64_t h,
                       cudaStream_t stream) {
  detail::with_storages(dtype, table_dtype, "embedding_forward", [&](auto s, auto p) {
    if (n <= 0 || h <= 0) return;
    launch("kernels::embedding_forward", forward_kernel<decltype(s)::value, decltype(p)::value>,
           token_shape(n, "kernels::embedding_forward"), stream, out, tokens, wte, positions, wpe,
           h);
  });
}

void embedding_forward(void* out, const std::int64_t* tokens, const float* wte,
                       const std::int64_t* positions, const float* wpe, tensor::DType dtype,
                       std::int64_t n, std::int64_t h, cudaStream_t stream) {
  embedding_forward(out, tokens, wte, positions, wpe, dtype, tensor::DType::kFloat32, n, h, stream);
}

void embedding_forward(float* out, const std::int64_t* tokens, const float* wte,
                       const std::int64_t* positions, const float* wpe, std::int64_t n,
                       std::int64_t h, cudaStream_t stream) {
  embedding_forward(out, tokens, wte, positions, wpe, tensor::DType::kFloat32, n, h, stream);
}

std::size_t embedding_backward_workspace_bytes(std::int64_t n, std::int64_t rows) {
  if (n <= 0 || rows <= 0) return 0;
  check_sizes(n, rows);
  return workspace_bytes(n, rows);
}

void embedding_backward(float* dtable, const void* dout, tensor::DType dout_dtype,
                        const std::int64_t* ids, std::int64_t n, std::int64_t h, std::int64_t rows,
                        std::int64_t vocab_start, void* workspace, std::size_t bytes,
                        cudaStream_t stream) {
  detail::storage_of(dout_dtype, "embedding_backward");  // refuses other dtypes before any work
  if (n <= 0 || h <= 0 || rows <= 0) return;
  check_sizes(n, rows);
  const std::size_t needed = workspace_bytes(n, rows);
  if (bytes < needed) {
    base::fail("cuda: kernels::embedding_backward: workspace of ", bytes, " bytes, ", needed,
               " needed");
  }
  const detail::LaunchShape accumulate = accumulate_shape(n, h);  // refuses a too wide h first
  Workspace w = carve(workspace, n);
  w.cub_bytes =
      bytes - static_cast<std::size_t>(static_cast<char*>(w.cub) - static_cast<char*>(workspace));
  launch("kernels::embedding_backward (keys)", sort_keys_kernel, sort_keys_shape(n), stream, w.keys,
         w.tokens, ids, n, rows, vocab_start);
  // Radix sort is stable: equal keys keep their token order.
  check_cuda(cub::DeviceRadixSort::SortPairs(w.cub, w.cub_bytes, w.keys, w.sorted_keys, w.tokens,
                                             w.sorted_tokens, static_cast<int>(n), 0,
                                             key_bits(rows), stream),
             "kernels::embedding_backward (sort)");
  detail::with_storage(dout_dtype, "embedding_backward", [&](auto s) {
    launch("kernels::embedding_backward (accumulate)", accumulate_kernel<decltype(s)::value>,
           accumulate, stream, dtable, dout, w.sorted_keys, w.sorted_tokens, n, h, rows);
  });
}

void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                        void* workspace, std::size_t bytes, cudaStream_t stream) {
  embedding_backward(dtable, dout, tensor::DType::kFloat32, ids, n, h, rows, vocab_start, workspace,
                     bytes, stream);
}

void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                        cudaStream_t stream) {
  if (n <= 0 || h <= 0 || rows <= 0) return;
  const std::size_t bytes = embedding_backward_workspace_bytes(n, rows);
  const CallScratch workspace(nullptr, bytes, stream);
  embedding_backward(dtable, dout, ids, n, h, rows, vocab_start, workspace.data(), bytes, stream);
}

}  // namespace mds::kernels
