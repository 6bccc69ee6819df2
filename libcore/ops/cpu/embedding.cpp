#include "ops/cpu/embedding.h"

#include <algorithm>

namespace mds::ops::cpu {

void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add) {
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t local = ids[t] - vocab_start;
    float* y = out + t * h;
    if (local < 0 || local >= rows) {
      if (!add) std::fill(y, y + h, 0.0f);
      continue;
    }
    const float* row = table + local * h;
    for (std::int64_t c = 0; c < h; ++c) y[c] = add ? y[c] + row[c] : row[c];
  }
}

void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start) {
  // Threads split the hidden dimension, so two tokens with the same id never race and each table
  // entry receives its additions in token order.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (h + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t begin = blk * kBlock, end = std::min(h, begin + kBlock);
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t local = ids[t] - vocab_start;
      if (local < 0 || local >= rows) continue;
      float* row = dtable + local * h;
      const float* g = dout + t * h;
      for (std::int64_t c = begin; c < end; ++c) row[c] += g[c];
    }
  }
}

}  // namespace mds::ops::cpu
