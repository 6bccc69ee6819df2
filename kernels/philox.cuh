// Device twin of ops/philox.h (Philox-4x32-10). ops/philox.h is host-only (std::array, no
// __host__ __device__), so the rounds are repeated here; tests/gpu checks that the masks they
// give are bit-identical to the CPU's.
#pragma once
#include <cmath>
#include <cstdint>

namespace mds::kernels::detail {

struct PhiloxWords {
  std::uint32_t w[4];
};

__device__ inline PhiloxWords philox_block(std::uint64_t seed, std::uint64_t offset,
                                           std::uint64_t group) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(group),
                c1 = static_cast<std::uint32_t>(group >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(offset),
                c3 = static_cast<std::uint32_t>(offset >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const std::uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// As ops::philox_uniform: the top 24 bits on a 2^-24 grid in [0, 1).
__device__ inline float philox_uniform(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// As ops::philox_half: element e's 16 bits (half e % 2 of word (e / 2) % 4 of its block e / 8),
// selected rather than indexed so that the words stay in registers.
__device__ inline std::uint32_t philox_half(const PhiloxWords& words, std::uint64_t e) {
  const std::uint64_t k = (e / 2) % 4;
  const std::uint32_t word = k == 0   ? words.w[0]
                             : k == 1 ? words.w[1]
                             : k == 2 ? words.w[2]
                                      : words.w[3];
  return (word >> (16 * (e % 2))) & 0xFFFFu;
}

// philox_uniform16(half) >= p as an integer test, half >= keep_threshold16(p): p·2^16 is exact in
// fp32 and a half an integer, so they decide alike for every half and every p in [0, 1].
__device__ inline std::uint32_t keep_threshold16(float p) {
  return static_cast<std::uint32_t>(ceilf(p * 65536.0f));
}

}  // namespace mds::kernels::detail
