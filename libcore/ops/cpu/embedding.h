// CPU reference of ops/embedding.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace mds::ops::cpu {

// Rows of ids outside [vocab_start, vocab_start + rows) are zero (or, with add, untouched).
void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add);
// The same from a table of `table_dtype` (fp32, bf16 or fp16), each looked-up value widened
// exactly: the fp32 lookup of the widened table, without widening the whole table.
void embedding_lookup(float* out, const std::int64_t* ids, const void* table,
                      tensor::DType table_dtype, std::int64_t n, std::int64_t h, std::int64_t rows,
                      std::int64_t vocab_start, bool add);
void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start);

}  // namespace mds::ops::cpu
