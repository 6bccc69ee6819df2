// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind dropout masks: a value depends only on (key, counter), so a mask
// is the same whatever the thread count or the order of kernels, and the backward recomputes it
// instead of storing it. Header-only so that a CUDA kernel can share it.
#pragma once
#include <array>
#include <cstdint>

namespace mds::ops {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kM0} * c[0];
    const std::uint64_t p1 = std::uint64_t{kM1} * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

// The four 32-bit words for elements 4·group … 4·group + 3 of stream `offset` under `seed`:
// counter = (group, offset) as two 64-bit halves, key = seed. Distinct offsets never share a
// counter, so streams for different (layer, step, micro-batch, rank) do not overlap.
inline PhiloxCounter philox_block(std::uint64_t seed, std::uint64_t offset, std::uint64_t group) {
  return philox4x32_10(
      {static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32),
       static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// A word as a uniform float in [0, 1) on a 2^-24 grid (exact in fp32).
inline float philox_uniform(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// The attention dropout's draws (ops::attention_dropout_keep): 16 bits an element, eight elements
// a block. Element e is half e % 2 of word (e / 2) % 4 of block e / 8, the low half first.
inline std::uint32_t philox_half(const PhiloxCounter& words, std::uint64_t e) {
  return (words[(e / 2) % 4] >> (16 * (e % 2))) & 0xFFFFu;
}

// A half as a uniform float in [0, 1) on a 2^-16 grid (exact in fp32).
inline float philox_uniform16(std::uint32_t half) {
  return static_cast<float>(half) * (1.0f / 65536.0f);
}

}  // namespace mds::ops
