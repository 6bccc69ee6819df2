// The attention dropout's keep bits (kernels/attention.h, ops::flash_attention_keep_bits_shape)
// checked against the host's masks: pair (row, key) of slice bh = batch·np + head is element
// (sh·s + row)·s + key of the Philox stream as ops::attention_dropout_keep draws it, sh =
// batch·stream_heads + first_head + head. Shared by the emulated kernel test and its GPU twin.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/attention.h"
#include "ops/dropout.h"

namespace mds::attention_keep_bits_test {

struct Slices {
  std::int64_t s, b, np;
  std::int64_t first_head = 0, stream_heads = 0;  // stream_heads 0: np
};

inline bool host_kept(const Slices& c, const ops::DropoutStream& d, std::int64_t bh,
                      std::int64_t row, std::int64_t key) {
  const std::int64_t stream_heads = c.stream_heads > 0 ? c.stream_heads : c.np;
  const std::int64_t sh = (bh / c.np) * stream_heads + c.first_head + bh % c.np;
  const auto index = static_cast<std::uint64_t>((sh * c.s + row) * c.s + key);
  return ops::attention_dropout_keep(d, index);
}

// How many pairs with key ≤ row have another bit than the host's decision.
inline std::size_t differing_from_host(const Slices& c, const ops::DropoutStream& d,
                                       const std::vector<std::uint32_t>& keep) {
  const std::int64_t words = ops::flash_attention_keep_bits_shape(1, 1, c.s)[3];
  std::size_t wrong = 0;
  for (std::int64_t bh = 0; bh < c.b * c.np; ++bh) {
    for (std::int64_t row = 0; row < c.s; ++row) {
      for (std::int64_t key = 0; key <= row; ++key) {
        const std::uint32_t word =
            keep[static_cast<std::size_t>((bh * c.s + row) * words + key / 32)];
        wrong += ((word >> (key % 32)) & 1u) != (host_kept(c, d, bh, row, key) ? 1u : 0u);
      }
    }
  }
  return wrong;
}

}  // namespace mds::attention_keep_bits_test
