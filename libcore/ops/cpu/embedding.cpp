#include "ops/cpu/embedding.h"

#include <algorithm>

#include "base/error.h"

namespace mds::ops::cpu {

namespace {

template <typename T>
void lookup(float* out, const std::int64_t* ids, const T* table, std::int64_t n, std::int64_t h,
            std::int64_t rows, std::int64_t vocab_start, bool add) {
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t local = ids[t] - vocab_start;
    float* y = out + t * h;
    if (local < 0 || local >= rows) {
      if (!add) std::fill(y, y + h, 0.0f);
      continue;
    }
    const T* row = table + local * h;
    for (std::int64_t c = 0; c < h; ++c)
      y[c] = add ? y[c] + tensor::to_float(row[c]) : tensor::to_float(row[c]);
  }
}

}  // namespace

void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add) {
  lookup(out, ids, table, n, h, rows, vocab_start, add);
}

void embedding_lookup(float* out, const std::int64_t* ids, const void* table,
                      tensor::DType table_dtype, std::int64_t n, std::int64_t h, std::int64_t rows,
                      std::int64_t vocab_start, bool add) {
  switch (table_dtype) {
    case tensor::DType::kFloat32:
      return lookup(out, ids, static_cast<const float*>(table), n, h, rows, vocab_start, add);
    case tensor::DType::kBFloat16:
      return lookup(out, ids, static_cast<const tensor::BFloat16*>(table), n, h, rows, vocab_start,
                    add);
    case tensor::DType::kFloat16:
      return lookup(out, ids, static_cast<const tensor::Float16*>(table), n, h, rows, vocab_start,
                    add);
    default:
      base::fail("ops::cpu::embedding_lookup: a table of ", tensor::dtype_name(table_dtype),
                 " is not float32, bfloat16 or float16");
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
