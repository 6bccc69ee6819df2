// BLOOM's ALiBi (--position-embedding-type alibi, training.md §1.4 step 5): a per-head bias
// slope·j on the score of key j, built as upstream's _build_alibi_tensor builds it.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/dtype.h"

namespace mds::model {

// get_slopes(heads) in Python doubles: start^(k+1), start = 2^(−8/n), for n a power of two; else
// the slopes of the power of two c below n, then every other slope of 2c, n − c of them.
std::vector<double> alibi_slopes(std::int64_t heads);

// The key bias of heads [first_head, first_head + local_heads) of `heads`, [local_heads, keys]
// row-major: fp32(slope) · j in fp32 (upstream's torch.Tensor(slopes) times arange), rounded to
// `dtype`, the params dtype upstream stores the tensor in (fp32, bf16 or fp16), and widened back.
std::vector<float> alibi_key_bias(std::int64_t heads, std::int64_t first_head,
                                  std::int64_t local_heads, std::int64_t keys, tensor::DType dtype);

}  // namespace mds::model
