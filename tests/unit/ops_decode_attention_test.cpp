// The decode attention (ops/attention.h: kv_cache_append, decode_attention_forward) against the
// full causal attention of the probabilities path: new positions [L, L + count) over a cache
// holding [0, L) give the full attention's context rows L .. L + count − 1.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/attention.h"
#include "ops_test_util.h"
#include "tensor/device_memory.h"
#include "test_support.h"

namespace mds::ops {
namespace {

using ops_test::random_floats;
using ops_test::view;
using tensor::Tensor;

struct Case {
  std::int64_t past, count, b, np, hn;
  float coeff;
};

// L = 0 and count = 1 included, the flash kernels' head dims and one without a kernel (24), a
// cache with room to spare (capacity > L + count), coeff > 1 (layer scaling).
const Case kCases[] = {{0, 1, 1, 1, 8, 1.0f},   {0, 7, 2, 3, 16, 1.0f},  {5, 1, 1, 2, 32, 2.0f},
                       {12, 4, 2, 2, 64, 1.0f}, {31, 1, 3, 1, 96, 3.0f}, {40, 9, 1, 2, 128, 1.0f},
                       {0, 33, 1, 2, 24, 1.0f}, {17, 16, 2, 2, 8, 1.0f}};

// Positions [from, from + count) of every row of a [s, b, w] tensor as [b, count, w].
std::vector<float> rows_of(const std::vector<float>& sbw, std::int64_t b, std::int64_t w,
                           std::int64_t from, std::int64_t count) {
  std::vector<float> out(static_cast<std::size_t>(b * count * w));
  for (std::int64_t r = 0; r < b; ++r) {
    for (std::int64_t i = 0; i < count; ++i) {
      const auto src = sbw.begin() + ((from + i) * b + r) * w;
      std::copy(src, src + w, out.begin() + (r * count + i) * w);
    }
  }
  return out;
}

struct Decoded {
  std::vector<float> context;  // [b, count, np·hn]
  std::vector<float> keys, values;
};

// The cache filled with positions [0, past) in `chunks` calls of kv_cache_append (and the
// attention of each chunk, as decoding runs it), then the new positions appended and attended.
Decoded decode(const std::vector<float>& qkv, const Case& c, std::int64_t capacity,
               std::int64_t chunks = 1) {
  const DeviceContext host;
  const std::int64_t w = c.np * 3 * c.hn, lh = c.np * c.hn;
  Decoded out;
  out.keys.assign(static_cast<std::size_t>(c.b * c.np * capacity * c.hn), 0.0f);
  out.values = out.keys;
  const Tensor keys = view(out.keys, {c.b, c.np, capacity, c.hn});
  const Tensor values = view(out.values, {c.b, c.np, capacity, c.hn});
  std::int64_t at = 0;
  for (std::int64_t k = 0; k < chunks && c.past > 0; ++k) {
    const std::int64_t n = k + 1 == chunks ? c.past - at : c.past / chunks;
    if (n == 0) continue;
    std::vector<float> part = rows_of(qkv, c.b, w, at, n),
                       context(static_cast<std::size_t>(c.b * n * lh));
    kv_cache_append(host, keys, values, view(part, {c.b, n, w}), at);
    decode_attention_forward(host, view(context, {c.b, n, lh}), view(part, {c.b, n, w}), keys,
                             values, at, c.coeff);
    at += n;
  }
  EXPECT_EQ(at, c.past);
  std::vector<float> fresh = rows_of(qkv, c.b, w, c.past, c.count);
  out.context.assign(static_cast<std::size_t>(c.b * c.count * lh), NAN);
  kv_cache_append(host, keys, values, view(fresh, {c.b, c.count, w}), c.past);
  decode_attention_forward(host, view(out.context, {c.b, c.count, lh}),
                           view(fresh, {c.b, c.count, w}), keys, values, c.past, c.coeff);
  return out;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

TEST(OpsDecodeAttention, EqualsTheFullCausalAttentionOnTheNewPositions) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "L=" << c.past << " count=" << c.count << " b=" << c.b
                                    << " np=" << c.np << " hn=" << c.hn << " coeff=" << c.coeff);
    const std::int64_t s = c.past + c.count, w = c.np * 3 * c.hn, lh = c.np * c.hn;
    std::vector<float> qkv = random_floats(static_cast<std::size_t>(s * c.b * w), 7, -2.0f, 2.0f);
    std::vector<float> full(static_cast<std::size_t>(s * c.b * lh)),
        probs(static_cast<std::size_t>(c.b * c.np * s * s));
    attention_forward(view(full, {s, c.b, lh}), view(probs, {c.b, c.np, s, s}),
                      view(qkv, {s, c.b, w}), c.coeff);
    const Decoded got = decode(qkv, c, s + 3);
    const std::vector<float> want = rows_of(full, c.b, lh, c.past, c.count);
    for (const float x : got.context) ASSERT_TRUE(std::isfinite(x));
    EXPECT_LE(relative_error(got.context, want), 1e-6);
  }
}

// Decoding is the same whether the earlier positions came in one call or several: each query's
// attention depends on its visible keys only (what makes KV-cache decoding equal recomputation).
TEST(OpsDecodeAttention, ChunkedPrefillIsBitIdentical) {
  for (const Case& c : kCases) {
    if (c.past < 3) continue;
    SCOPED_TRACE(testing::Message() << "L=" << c.past << " hn=" << c.hn);
    const std::int64_t s = c.past + c.count, w = c.np * 3 * c.hn;
    const std::vector<float> qkv = random_floats(static_cast<std::size_t>(s * c.b * w), 11);
    const Decoded once = decode(qkv, c, s), chunked = decode(qkv, c, s, 3);
    EXPECT_EQ(once.context, chunked.context);
    EXPECT_EQ(once.keys, chunked.keys);
    EXPECT_EQ(once.values, chunked.values);
  }
}

TEST(OpsDecodeAttention, AppendCopiesKeysAndValuesIntoTheirSlots) {
  const Case c{2, 3, 2, 2, 4, 1.0f};
  const std::int64_t capacity = 6, w = c.np * 3 * c.hn;
  std::vector<float> qkv(static_cast<std::size_t>(c.b * c.count * w));
  for (std::size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i);
  std::vector<float> keys(static_cast<std::size_t>(c.b * c.np * capacity * c.hn), -1.0f),
      values = keys;
  kv_cache_append(DeviceContext{}, view(keys, {c.b, c.np, capacity, c.hn}),
                  view(values, {c.b, c.np, capacity, c.hn}), view(qkv, {c.b, c.count, w}), c.past);
  for (std::int64_t r = 0; r < c.b; ++r) {
    for (std::int64_t head = 0; head < c.np; ++head) {
      for (std::int64_t p = 0; p < capacity; ++p) {
        for (std::int64_t e = 0; e < c.hn; ++e) {
          const std::size_t slot =
              static_cast<std::size_t>(((r * c.np + head) * capacity + p) * c.hn + e);
          const bool fresh = p >= c.past && p < c.past + c.count;
          const float base = static_cast<float>((r * c.count + p - c.past) * w + head * 3 * c.hn);
          EXPECT_EQ(keys[slot], fresh ? base + static_cast<float>(c.hn + e) : -1.0f);
          EXPECT_EQ(values[slot], fresh ? base + static_cast<float>(2 * c.hn + e) : -1.0f);
        }
      }
    }
  }
}

TEST(OpsDecodeAttention, BadArgumentsFailWithOneLine) {
  const DeviceContext host;
  std::vector<float> cache(2 * 2 * 4 * 8), other = cache, qkv(2 * 3 * 2 * 3 * 8), ctx(2 * 3 * 16);
  const Tensor keys = view(cache, {2, 2, 4, 8}), values = view(other, {2, 2, 4, 8});
  const auto error = [](const std::function<void()>& call) {
    return testing_support::one_line_error(call);
  };
  EXPECT_NE(error([&] {
              kv_cache_append(host, keys, values, view(qkv, {2, 3, 48}), 2);
            }).find("ops::kv_cache_append: positions [2, 5) do not fit the cache of 4"),
            std::string::npos);
  EXPECT_NE(error([&] {
              kv_cache_append(host, keys, values, view(qkv, {3, 2, 48}), 0);
            }).find("ops::kv_cache_append: qkv must be [b, count, np*3*hn] = [2, count, 48]"),
            std::string::npos);
  EXPECT_NE(error([&] {
              decode_attention_forward(host, view(ctx, {2, 3, 16}), view(qkv, {2, 3, 48}), keys,
                                       values, 0, 0.5f);
            }).find("ops::decode_attention_forward: coeff must be >= 1"),
            std::string::npos);
  EXPECT_NE(error([&] {
              decode_attention_forward(host, view(ctx, {2, 3, 16}), view(qkv, {2, 3, 48}), keys,
                                       view(other, {2, 2, 2, 16}), 0, 1.0f);
            }).find("ops::decode_attention_forward: values"),
            std::string::npos);
  const Tensor device_keys(cache.data(), tensor::DType::kFloat32, {2, 2, 4, 8},
                           tensor::Device{tensor::DeviceKind::kCuda, 0});
  const Tensor device_values(other.data(), tensor::DType::kFloat32, {2, 2, 4, 8},
                             tensor::Device{tensor::DeviceKind::kCuda, 0});
  const Tensor device_qkv(qkv.data(), tensor::DType::kFloat32, {2, 3, 48},
                          tensor::Device{tensor::DeviceKind::kCuda, 0});
  EXPECT_NE(error([&] { kv_cache_append(host, device_keys, device_values, device_qkv, 0); })
                .find("ops::kv_cache_append: the tensors are on cuda:0 but the DeviceContext "
                      "runs on cpu"),
            std::string::npos);
  EXPECT_NE(
      error([&] {
        decode_attention_forward(host, view(ctx, {2, 3, 16}), device_qkv, keys, values, 0, 1.0f);
      }).find("ops::decode_attention_forward:"),
      std::string::npos);
}

TEST(OpsDecodeAttention, CudaKernelsExistForTheFlashHeadDims) {
  for (const std::int64_t hn : {8, 16, 32, 64, 96, 128}) {
    EXPECT_EQ(decode_attention_supports_cuda(hn), tensor::kCudaBuilt) << hn;
  }
  EXPECT_FALSE(decode_attention_supports_cuda(24));
}

}  // namespace
}  // namespace mds::ops
