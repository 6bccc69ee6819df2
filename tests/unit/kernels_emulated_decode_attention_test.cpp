// The decode-attention kernels' device code (kernels/decode_attention_kernels.cuh) run on the CPU
// under a SIMT emulation against their CPU twin (ops/cpu/decode_attention): the cache append bit
// for bit, the attention within 1e-5 (tests/gpu/decode_attention_test.cpp's bound), over L = 0,
// count = 1, more than 256 visible positions (several keys per thread) and every head dim; the
// shared memory is poisoned with NaN before each block and the unwritten cache slots hold NaN, so
// a read of what nobody wrote shows. Checks indexing, the causal mask, the chunked value sums and
// the barriers where there is no GPU; says nothing about the launch code or real scheduling. The
// bf16/fp16 instances run against the host's 16-bit decode attention (ops/attention.h).
#include "tests/unit/simt_emulation.h"

namespace mds::kernels::decode_detail {
float smem[simt::kSharedFloats];
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/decode_attention_kernels.cuh"
#include "model/alibi.h"
#include "ops/attention.h"
#include "ops/cpu/decode_attention.h"
#include "tests/unit/emulated_storage.h"

namespace mds {
namespace {

namespace dd = kernels::decode_detail;

struct Case {
  std::int64_t past, count, b, np, hn;
  float coeff;
};
const Case kCases[] = {{0, 1, 1, 1, 8, 1.0f},    {0, 7, 2, 3, 16, 1.0f},  {5, 1, 1, 2, 32, 2.0f},
                       {12, 4, 2, 2, 64, 1.0f},  {31, 1, 3, 1, 96, 3.0f}, {40, 3, 1, 2, 128, 1.0f},
                       {300, 2, 1, 1, 64, 1.0f}, {0, 20, 1, 1, 8, 1.0f}};

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

template <int kHn, typename Io = kernels::attention_io::Fp32Io>
void run_decode(typename Io::Elem* ctx, const typename Io::Elem* qkv, const typename Io::Elem* keys,
                const typename Io::Elem* values, const ops::cpu::DecodeAttentionDims& d,
                float coeff, const float* key_bias = nullptr, std::int64_t key_bias_ld = 0) {
  const float alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(kHn)) * coeff));
  ASSERT_LE(dd::shared_floats<kHn>(d.past + d.count),
            static_cast<std::int64_t>(simt::kSharedFloats));
  simt::launch(
      static_cast<unsigned>(d.b * d.np), static_cast<unsigned>(d.count),
      [&] {
        dd::decode_kernel<kHn, Io>(ctx, qkv, keys, values,
                                   {d.count, d.np, d.past, d.capacity, key_bias, key_bias_ld},
                                   alpha, coeff);
      },
      [] {
        for (float& x : dd::smem) x = NAN;
      });
}

void decode(float* ctx, const float* qkv, const float* keys, const float* values,
            const ops::cpu::DecodeAttentionDims& d, float coeff) {
  switch (d.hn) {
    case 8:
      return run_decode<8>(ctx, qkv, keys, values, d, coeff);
    case 16:
      return run_decode<16>(ctx, qkv, keys, values, d, coeff);
    case 32:
      return run_decode<32>(ctx, qkv, keys, values, d, coeff);
    case 64:
      return run_decode<64>(ctx, qkv, keys, values, d, coeff);
    case 96:
      return run_decode<96>(ctx, qkv, keys, values, d, coeff);
    case 128:
      return run_decode<128>(ctx, qkv, keys, values, d, coeff);
    default:
      FAIL() << "no kernel for head dim " << d.hn;
  }
}

// ALiBi: the key bias of each cached position over coeff joins its score, as the host twin's.
TEST(KernelsEmulatedDecodeAttention, AlibiKeyBiasMatchesTheCpuTwin) {
  for (const Case& c : {Case{12, 4, 2, 4, 32, 2.0f}, Case{40, 1, 1, 12, 16, 1.0f}}) {
    SCOPED_TRACE(testing::Message() << "L=" << c.past << " np=" << c.np);
    const ops::cpu::DecodeAttentionDims d{c.b, c.count, c.np, c.hn, c.past, c.past + c.count};
    const std::vector<float> bias =
        model::alibi_key_bias(c.np, 0, c.np, d.capacity + 3, tensor::DType::kFloat32);
    const std::vector<float> qkv =
        random_floats(static_cast<std::size_t>(c.b * c.count * c.np * 3 * c.hn), 6);
    std::vector<float> keys =
        random_floats(static_cast<std::size_t>(c.b * c.np * d.capacity * c.hn), 7);
    std::vector<float> values = random_floats(keys.size(), 8);
    ops::cpu::kv_cache_append(keys.data(), values.data(), qkv.data(), d);
    std::vector<float> want(static_cast<std::size_t>(c.b * c.count * c.np * c.hn));
    ops::cpu::decode_attention_forward(want.data(), qkv.data(), keys.data(), values.data(), d,
                                       c.coeff, bias.data(), d.capacity + 3);
    std::vector<float> plain(want.size());
    ops::cpu::decode_attention_forward(plain.data(), qkv.data(), keys.data(), values.data(), d,
                                       c.coeff);
    std::vector<float> got(want.size(), NAN);
    if (c.hn == 32) {
      run_decode<32>(got.data(), qkv.data(), keys.data(), values.data(), d, c.coeff, bias.data(),
                     d.capacity + 3);
    } else {
      run_decode<16>(got.data(), qkv.data(), keys.data(), values.data(), d, c.coeff, bias.data(),
                     d.capacity + 3);
    }
    double diff = 0.0, norm = 0.0, moved = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
      moved += std::fabs(static_cast<double>(want[i]) - plain[i]);
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-5);
    EXPECT_GT(moved, 1e-2);  // the bias changes the result: the check means something
  }
}

TEST(KernelsEmulatedDecodeAttention, MatchesTheCpuTwin) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "L=" << c.past << " count=" << c.count << " b=" << c.b
                                    << " np=" << c.np << " hn=" << c.hn);
    const ops::cpu::DecodeAttentionDims d{c.b, c.count, c.np, c.hn, c.past, c.past + c.count + 2};
    const std::vector<float> qkv =
        random_floats(static_cast<std::size_t>(c.b * c.count * c.np * 3 * c.hn), 3);
    // Earlier positions random, the rest NaN until appended (the two spare slots stay NaN).
    std::vector<float> keys =
        random_floats(static_cast<std::size_t>(c.b * c.np * d.capacity * c.hn), 4);
    std::vector<float> values = random_floats(keys.size(), 5);
    for (std::int64_t slice = 0; slice < c.b * c.np; ++slice) {
      for (std::int64_t p = c.past; p < d.capacity; ++p) {
        for (std::int64_t e = 0; e < c.hn; ++e) {
          const auto at = static_cast<std::size_t>((slice * d.capacity + p) * c.hn + e);
          keys[at] = values[at] = NAN;
        }
      }
    }
    std::vector<float> want_keys = keys, want_values = values;
    ops::cpu::kv_cache_append(want_keys.data(), want_values.data(), qkv.data(), d);
    std::vector<float> want(static_cast<std::size_t>(c.b * c.count * c.np * c.hn));
    ops::cpu::decode_attention_forward(want.data(), qkv.data(), want_keys.data(),
                                       want_values.data(), d, c.coeff);

    // Two blocks of the append's grid-stride loop, whatever the size.
    const std::int64_t n = c.b * c.count * c.np * c.hn;
    simt::launch(
        2, 1,
        [&] {
          dd::append_kernel(keys.data(), values.data(), qkv.data(),
                            {d.count, d.np, d.past, d.capacity}, c.hn, n);
        },
        [] {});
    EXPECT_EQ(std::memcmp(keys.data(), want_keys.data(), keys.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(values.data(), want_values.data(), values.size() * sizeof(float)), 0);

    std::vector<float> got(want.size(), NAN);
    decode(got.data(), qkv.data(), keys.data(), values.data(), d, c.coeff);
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-5);
    std::vector<float> again(want.size(), NAN);
    decode(again.data(), qkv.data(), keys.data(), values.data(), d, c.coeff);
    EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0);
  }
}

// The 16-bit instances: the append copies the 16-bit k and v bit for bit, the attention (fp32
// math on the same widened values, another summation order) is within one 16-bit ulp of the
// host's 16-bit decode attention (the fp32 op on widened inputs, rounded once), or within
// 1e-4·rms where that is near zero.
template <int kHn, typename T>
void check_16bit(const Case& c) {
  SCOPED_TRACE(testing::Message() << (std::is_same_v<T, tensor::BFloat16> ? "bf16" : "fp16")
                                  << " L=" << c.past << " count=" << c.count << " b=" << c.b
                                  << " np=" << c.np << " hn=" << kHn);
  const ops::cpu::DecodeAttentionDims d{c.b, c.count, c.np, kHn, c.past, c.past + c.count + 2};
  const auto narrowed = [](const std::vector<float>& v) {
    std::vector<T> out;
    for (const float x : v) out.push_back(tensor::round_to<T>(x));
    return out;
  };
  std::vector<T> qkv =
      narrowed(random_floats(static_cast<std::size_t>(c.b * c.count * c.np * 3 * kHn), 6));
  std::vector<T> keys =
      narrowed(random_floats(static_cast<std::size_t>(c.b * c.np * d.capacity * kHn), 7));
  std::vector<T> values = narrowed(random_floats(keys.size(), 8));
  std::vector<T> want_keys = keys, want_values = values;
  std::vector<T> want(static_cast<std::size_t>(c.b * c.count * c.np * kHn));
  const tensor::Shape cache_shape{c.b, c.np, d.capacity, kHn},
      qkv_shape{c.b, c.count, c.np * 3 * kHn};
  const auto t = [](std::vector<T>& v, const tensor::Shape& shape) {
    return tensor::Tensor(v.data(), tensor::dtype_of<T>(), shape);
  };
  const ops::DeviceContext host;
  ops::kv_cache_append(host, t(want_keys, cache_shape), t(want_values, cache_shape),
                       t(qkv, qkv_shape), c.past);
  ops::decode_attention_forward(host, t(want, {c.b, c.count, c.np * kHn}), t(qkv, qkv_shape),
                                t(want_keys, cache_shape), t(want_values, cache_shape), c.past,
                                c.coeff);

  const std::int64_t n = c.b * c.count * c.np * kHn;
  simt::launch(
      2, 1,
      [&] {
        dd::append_kernel(keys.data(), values.data(), qkv.data(),
                          {d.count, d.np, d.past, d.capacity}, kHn, n);
      },
      [] {});
  EXPECT_EQ(emulated::bits(keys), emulated::bits(want_keys));
  EXPECT_EQ(emulated::bits(values), emulated::bits(want_values));
  std::vector<T> got(want.size(), T{0xFFFF});
  run_decode<kHn, emulated::HostBits16Io<T>>(got.data(), qkv.data(), keys.data(), values.data(), d,
                                             c.coeff);
  EXPECT_EQ(emulated::count_beyond_one_ulp(got, want, 0, got.size(), got.size()), 0u);
}

TEST(KernelsEmulatedDecodeAttention, SixteenBitStorageMatchesHost16BitDecode) {
  check_16bit<8, tensor::BFloat16>({0, 1, 1, 1, 8, 1.0f});
  check_16bit<64, tensor::BFloat16>({300, 2, 1, 2, 64, 1.0f});
  check_16bit<16, tensor::Float16>({12, 4, 2, 2, 16, 2.0f});
  check_16bit<64, tensor::Float16>({33, 1, 1, 1, 64, 1.0f});
}

}  // namespace
}  // namespace mds
