// CPU reference of ops/embedding.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

namespace mds::ops::cpu {

// Rows of ids outside [vocab_start, vocab_start + rows) are zero (or, with add, untouched).
void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add);
void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start);

}  // namespace mds::ops::cpu
