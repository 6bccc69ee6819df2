// The decode-attention kernels (kernels/decode_attention.h) against their CPU twin
// (ops/cpu/decode_attention.h): the cache append bit for bit (unwritten slots keep their poison),
// the attention within 1e-5 relative, over new positions [L, L + count) with L = 0, count = 1,
// counts across the grid, every head dim, batches and heads, and positions past 256 (several
// keys per thread) and 4096; two runs bit-identical; threads launching it with different cache
// lengths at once (pipeline ranks sharing a process), and a cache past the shared memory.
#include "kernels/decode_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "base/error.h"
#include "ops/cpu/decode_attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using ops::cpu::DecodeAttentionDims;

struct Case {
  std::int64_t past, count, b, np, hn;
  float coeff;
};
const Case kCases[] = {{0, 1, 1, 1, 8, 1.0f},      {0, 7, 2, 3, 16, 1.0f},
                       {5, 1, 1, 2, 32, 2.0f},     {12, 4, 2, 2, 64, 1.0f},
                       {31, 1, 3, 1, 96, 3.0f},    {40, 9, 1, 2, 128, 1.0f},
                       {255, 2, 2, 2, 64, 1.0f},   {0, 300, 1, 2, 16, 1.0f},
                       {1023, 1, 2, 12, 64, 1.0f}, {4095, 1, 1, 2, 128, 1.0f}};

testing::Message describe(const Case& c) {
  return testing::Message() << "L=" << c.past << " count=" << c.count << " b=" << c.b
                            << " np=" << c.np << " hn=" << c.hn << " coeff=" << c.coeff;
}

std::vector<float> poisoned(std::size_t n) {
  std::vector<float> v(n);
  std::memset(v.data(), 0xFF, n * sizeof(float));
  return v;
}

struct Inputs {
  explicit Inputs(const Case& c)
      : d{c.b, c.count, c.np, c.hn, c.past, c.past + c.count + 2},
        qkv(random_floats(static_cast<std::size_t>(c.b * c.count * c.np * 3 * c.hn), 5)),
        cache(poisoned(static_cast<std::size_t>(c.b * c.np * d.capacity * c.hn))) {
    // Positions [0, L) hold earlier keys and values; the two slots past the new ones stay poisoned
    // (a read of them would turn the context into NaN).
    const std::vector<float> earlier = random_floats(cache.size(), 9);
    for (std::int64_t slice = 0; slice < c.b * c.np; ++slice) {
      const auto at = static_cast<std::size_t>(slice * d.capacity * c.hn);
      std::copy(earlier.begin() + static_cast<std::ptrdiff_t>(at),
                earlier.begin() + static_cast<std::ptrdiff_t>(at + c.past * c.hn),
                cache.begin() + static_cast<std::ptrdiff_t>(at));
    }
    values = cache;
    for (std::int64_t slice = 0; slice < c.b * c.np; ++slice) {
      const auto at = static_cast<std::size_t>(slice * d.capacity * c.hn);
      for (std::int64_t i = 0; i < c.past * c.hn; ++i) {
        values[at + static_cast<std::size_t>(i)] = -0.5f * cache[at + static_cast<std::size_t>(i)];
      }
    }
  }
  DecodeAttentionDims d;
  std::vector<float> qkv, cache, values;
};

TEST(DecodeAttentionKernel, AppendIsBitIdenticalToTheCpu) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    Inputs in(c);
    std::vector<float> keys = in.cache, values = in.values;
    ops::cpu::kv_cache_append(keys.data(), values.data(), in.qkv.data(), in.d);
    DeviceArray<float> dqkv(in.qkv), dkeys(in.cache), dvalues(in.values);
    kernels::kv_cache_append(dkeys.get(), dvalues.get(), dqkv.get(), in.d, nullptr);
    const std::vector<float> got_keys = dkeys.download(), got_values = dvalues.download();
    EXPECT_EQ(std::memcmp(got_keys.data(), keys.data(), keys.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(got_values.data(), values.data(), values.size() * sizeof(float)), 0);
  }
}

TEST(DecodeAttentionKernel, MatchesTheCpuTwinAndRepeatsBitForBit) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    Inputs in(c);
    std::vector<float> keys = in.cache, values = in.values;
    ops::cpu::kv_cache_append(keys.data(), values.data(), in.qkv.data(), in.d);
    std::vector<float> want(static_cast<std::size_t>(c.b * c.count * c.np * c.hn));
    ops::cpu::decode_attention_forward(want.data(), in.qkv.data(), keys.data(), values.data(), in.d,
                                       c.coeff);

    DeviceArray<float> dqkv(in.qkv), dkeys(in.cache), dvalues(in.values);
    kernels::kv_cache_append(dkeys.get(), dvalues.get(), dqkv.get(), in.d, nullptr);
    DeviceArray<float> first(want.size()), second(want.size());
    kernels::decode_attention_forward(first.get(), dqkv.get(), dkeys.get(), dvalues.get(), in.d,
                                      c.coeff, nullptr);
    kernels::decode_attention_forward(second.get(), dqkv.get(), dkeys.get(), dvalues.get(), in.d,
                                      c.coeff, nullptr);
    const std::vector<float> got = first.download(), again = second.download();
    MDS_EXPECT_CLOSE(got, want, 1e-5);
    EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0);
  }
}

// ALiBi: a key bias [np, K] (slopes 2^-(h+1)) joins the scores over coeff, as the host twin adds
// it, for every case.
TEST(DecodeAttentionKernel, AlibiKeyBiasMatchesTheCpuTwin) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    Inputs in(c);
    const std::int64_t ld = in.d.capacity;
    std::vector<float> bias(static_cast<std::size_t>(c.np * ld));
    for (std::int64_t h = 0; h < c.np; ++h) {
      for (std::int64_t j = 0; j < ld; ++j) {
        bias[static_cast<std::size_t>(h * ld + j)] =
            std::ldexp(1.0f, -static_cast<int>(h % 8 + 1)) * static_cast<float>(j);
      }
    }
    std::vector<float> keys = in.cache, values = in.values;
    ops::cpu::kv_cache_append(keys.data(), values.data(), in.qkv.data(), in.d);
    std::vector<float> want(static_cast<std::size_t>(c.b * c.count * c.np * c.hn));
    ops::cpu::decode_attention_forward(want.data(), in.qkv.data(), keys.data(), values.data(), in.d,
                                       c.coeff, bias.data(), ld);
    DeviceArray<float> dqkv(in.qkv), dkeys(in.cache), dvalues(in.values), dbias(bias),
        got(want.size());
    kernels::kv_cache_append(dkeys.get(), dvalues.get(), dqkv.get(), in.d, nullptr);
    kernels::decode_attention_forward(got.get(), dqkv.get(), dkeys.get(), dvalues.get(),
                                      tensor::DType::kFloat32, in.d, c.coeff, nullptr, dbias.get(),
                                      ld);
    MDS_EXPECT_CLOSE(got.download(), want, 1e-5);
  }
}

TEST(DecodeAttentionKernel, HeadDimsWithoutAKernelFail) {
  EXPECT_TRUE(kernels::decode_attention_head_dim_supported(64));
  EXPECT_FALSE(kernels::decode_attention_head_dim_supported(24));
  DeviceArray<float> buffer(64);
  const DecodeAttentionDims d{1, 1, 1, 24, 0, 1};
  EXPECT_THROW(kernels::decode_attention_forward(buffer.get(), buffer.get(), buffer.get(),
                                                 buffer.get(), d, 1.0f, nullptr),
               base::Error);
}

// Pipeline stages on one GPU run as threads of one process: one decoding past the 48 KiB of
// shared memory, the other below it. The kernel's shared-memory attribute is the process's, so a
// thread lowering it between the other's opt-in and launch failed that launch (InferenceGrid's
// 1×2×1 grid on an H100, "invalid argument").
TEST(DecodeAttentionKernel, ThreadsWithDifferentCacheLengthsLaunchTogether) {
  const Case long_cache{13000, 1, 1, 1, 64, 1.0f}, short_cache{10, 1, 1, 1, 64, 1.0f};
  std::string errors[2];
  const auto decode = [](const Case& c, std::string& error) {
    try {
      Inputs in(c);
      DeviceArray<float> dqkv(in.qkv), dkeys(in.cache), dvalues(in.values);
      DeviceArray<float> ctx(static_cast<std::size_t>(c.hn));
      cudaStream_t stream = nullptr;
      kernels::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      for (int i = 0; i < 300; ++i) {
        kernels::decode_attention_forward(ctx.get(), dqkv.get(), dkeys.get(), dvalues.get(), in.d,
                                          c.coeff, stream);
      }
      kernels::check_cuda(cudaStreamSynchronize(stream), "synchronize");
      cudaStreamDestroy(stream);
    } catch (const base::Error& e) {
      error = e.what();
    }
  };
  std::thread first(decode, long_cache, std::ref(errors[0]));
  std::thread second(decode, short_cache, std::ref(errors[1]));
  first.join();
  second.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(DecodeAttentionKernel, CachesPastTheSharedMemoryFailNamingIt) {
  const Case c{70000, 1, 1, 1, 8, 1.0f};
  Inputs in(c);
  DeviceArray<float> dqkv(in.qkv), dkeys(in.cache), dvalues(in.values), ctx(8);
  try {
    kernels::decode_attention_forward(ctx.get(), dqkv.get(), dkeys.get(), dvalues.get(), in.d,
                                      c.coeff, nullptr);
    ADD_FAILURE() << "a cache of 70000 positions fit in shared memory";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("decode_attention_forward (shared memory): needs"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mds
