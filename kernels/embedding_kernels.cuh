// Device code of kernels/embedding.cu (launched from there) and its launch shapes, plain CUDA with
// no runtime includes so that tests/unit/kernels_emulated_embedding_test.cpp can compile it for the
// CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that test
// only; the kernels have internal linkage (see elementwise_kernels.cuh). The backward's sort
// between sort_keys_kernel and accumulate_kernel is CUB's, in the .cu.
#pragma once
#include <cstdint>

#include "base/error.h"
#include "kernels/device_portable.cuh"

namespace mds::kernels::embedding_detail {
namespace {

using detail::kThreads;
using detail::load;
using detail::Storage;
using detail::store;

// out (and the backward's dout) are stored as kS: widened on load, rounded on store; tables as kP
// (fp32, or kS: widened on load, so a 16-bit table gives the bits of its fp32 widening).
template <Storage kS, Storage kP>
__global__ void lookup_kernel(void* out, const std::int64_t* ids, const void* table, std::int64_t h,
                              std::int64_t rows, std::int64_t vocab_start, bool add) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t local = ids[t] - vocab_start;
  const std::int64_t first = t * h;
  if (local < 0 || local >= rows) {
    if (add) return;
    for (std::int64_t c = threadIdx.x; c < h; c += kThreads) store<kS>(out, first + c, 0.0f);
    return;
  }
  const std::int64_t row = local * h;
  for (std::int64_t c = threadIdx.x; c < h; c += kThreads) {
    const float value = load<kP>(table, row + c);
    store<kS>(out, first + c, add ? load<kS>(out, first + c) + value : value);
  }
}

template <Storage kS, Storage kP>
__global__ void forward_kernel(void* out, const std::int64_t* tokens, const void* wte,
                               const std::int64_t* positions, const void* wpe, std::int64_t h) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t word = tokens[t] * h, position = positions[t] * h;
  for (std::int64_t c = threadIdx.x; c < h; c += kThreads)
    store<kS>(out, t * h + c, load<kP>(wte, word + c) + load<kP>(wpe, position + c));
}

// Sort keys: the local row, or `rows` (sorting after every real row) for ids of other shards.
__global__ void sort_keys_kernel(std::uint32_t* keys, std::uint32_t* tokens,
                                 const std::int64_t* ids, std::int64_t n, std::int64_t rows,
                                 std::int64_t vocab_start) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const std::int64_t local = ids[t] - vocab_start;
  keys[t] = static_cast<std::uint32_t>(local >= 0 && local < rows ? local : rows);
  tokens[t] = static_cast<std::uint32_t>(t);
}

// Block (p, y) is the owner of sorted position p's row if p starts that row's run of equal keys;
// its threads take columns y·kThreads + threadIdx.x and add the run's tokens in sorted order,
// which the stable sort leaves in token order. Other blocks return at once.
template <Storage kS>
__global__ void accumulate_kernel(float* dtable, const void* dout, const std::uint32_t* keys,
                                  const std::uint32_t* tokens, std::int64_t n, std::int64_t h,
                                  std::int64_t rows) {
  const std::int64_t p = blockIdx.x;
  const std::uint32_t key = keys[p];
  if (key >= rows || (p > 0 && keys[p - 1] == key)) return;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= h) return;
  float* entry = dtable + static_cast<std::int64_t>(key) * h + c;
  float sum = *entry;
  for (std::int64_t q = p; q < n && keys[q] == key; ++q) {
    sum += load<kS>(dout, static_cast<std::int64_t>(tokens[q]) * h + c);
  }
  *entry = sum;
}

// lookup_kernel and forward_kernel: one block per token.
inline detail::LaunchShape token_shape(std::int64_t n, const char* kernel) {
  return detail::row_shape(n, kernel);
}

// sort_keys_kernel: one thread per token.
inline detail::LaunchShape sort_keys_shape(std::int64_t n) {
  return detail::thread_per_element_shape(n);
}

// accumulate_kernel: a block per sorted position across, per kThreads columns down.
inline detail::LaunchShape accumulate_shape(std::int64_t n, std::int64_t h) {
  const std::int64_t column_blocks = (h + kThreads - 1) / kThreads;
  if (column_blocks > 65535)
    base::fail("cuda: kernels::embedding_backward: h = ", h, " is too wide");
  return {
      {detail::row_grid(n, "kernels::embedding_backward"), static_cast<unsigned>(column_blocks)},
      {kThreads}};
}

}  // namespace
}  // namespace mds::kernels::embedding_detail
