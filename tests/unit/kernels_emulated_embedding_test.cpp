// The embedding kernels' device code (kernels/embedding_kernels.cuh) run on the CPU under the SIMT
// emulation with the launch shapes kernels/embedding.cu uses, against their CPU twins
// (ops/cpu/embedding): the vocab-parallel lookup (plain and added), the token + position forward
// and the deterministic backward, bit for bit (tests/gpu/embedding_test.cpp's bound), fp32 and the
// 16-bit storages of out and dout (fp32 tables), and 16-bit tables against their fp32 widening
// and against the host's lookup from a 16-bit table. The backward runs its real key kernel and
// accumulation kernel; only CUB's stable radix sort between them is replaced by std::stable_sort.
// Outputs start poisoned, guards stay untouched, the backward repeats bit for bit.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/embedding_kernels.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/embedding.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace ek = kernels::embedding_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;

struct Case {
  std::int64_t n, h, rows, vocab_start;
  std::int64_t id_limit;  // ids drawn from [0, id_limit): beyond the shard when it exceeds rows
  bool skewed;            // half the tokens share one id (a long run for one row's owner)
};
// tests/gpu/embedding_test.cpp's cases, fewer tokens where they only cost time (one block each).
const Case kCases[] = {{1, 1, 1, 0, 1, false},          {7, 3, 5, 0, 5, false},
                       {300, 257, 50, 0, 50, false},    {260, 768, 1003, 500, 2500, false},
                       {1029, 64, 7, 0, 7, true},       {600, 129, 5000, 0, 5000, true},
                       {513, 1000, 300, 300, 900, true}};
// The 16-bit instances differ only in their loads and stores: three cases (sharded, several
// column blocks, a long run).
const Case k16BitCases[] = {kCases[1], kCases[2], kCases[6]};

std::vector<std::int64_t> random_ids(const Case& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, c.id_limit - 1);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(c.n));
  for (std::size_t t = 0; t < ids.size(); ++t) {
    ids[t] = c.skewed && t % 2 == 0 ? c.vocab_start + c.rows / 2 : dist(rng);
  }
  return ids;
}

std::string describe(const Case& c, Storage s) {
  return std::string(emulated::storage_name(s)) + " " + std::to_string(c.n) +
         " tokens, h=" + std::to_string(c.h) + ", rows " + std::to_string(c.vocab_start) + "+" +
         std::to_string(c.rows);
}

template <Storage kS>
void check_lookup(const Case& c) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = describe(c, kS);
  const auto size = static_cast<std::size_t>(c.n * c.h);
  const GuardedBuffer<float> table(
      emulated::random_floats(static_cast<std::size_t>(c.rows * c.h), 60));
  const GuardedBuffer<std::int64_t> ids(random_ids(c, 61));
  const std::vector<T> initial = to_storage<kS>(emulated::random_floats(size, 62));
  for (const bool add : {false, true}) {
    std::vector<float> want = add ? to_fp32<kS>(initial) : std::vector<float>(size);
    ops::cpu::embedding_lookup(want.data(), ids.data(), table.data(), c.n, c.h, c.rows,
                               c.vocab_start, add);
    GuardedBuffer<T> out(size);  // without add: from the 0xFF poison
    if (add) out.assign(initial);
    emulated::launch(ek::token_shape(c.n, "test"), [&] {
      ek::lookup_kernel<kS, Storage::kF32>(out.data(), ids.data(), table.data(), c.h, c.rows,
                                           c.vocab_start, add);
    });
    // A copy or one addition per element: exact.
    emulated::expect_activation_equal<kS>(out.values(), want,
                                          what + (add ? " lookup add" : " lookup"));
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
  }
}

template <Storage kS>
void check_forward(const Case& c) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = describe(c, kS);
  const auto size = static_cast<std::size_t>(c.n * c.h);
  const std::int64_t max_positions = 97;
  const GuardedBuffer<float> wte(
      emulated::random_floats(static_cast<std::size_t>(c.rows * c.h), 63));
  const GuardedBuffer<float> wpe(
      emulated::random_floats(static_cast<std::size_t>(max_positions * c.h), 64));
  const GuardedBuffer<std::int64_t> tokens(random_ids(c, 65));
  std::vector<std::int64_t> position_ids(static_cast<std::size_t>(c.n));
  for (std::size_t t = 0; t < position_ids.size(); ++t) {
    position_ids[t] = static_cast<std::int64_t>(t) % max_positions;
  }
  const GuardedBuffer<std::int64_t> positions(position_ids);
  // wte + wpe in fp32, rounded once.
  std::vector<float> want(size);
  ops::cpu::embedding_lookup(want.data(), tokens.data(), wte.data(), c.n, c.h, c.rows, 0, false);
  ops::cpu::embedding_lookup(want.data(), positions.data(), wpe.data(), c.n, c.h, max_positions, 0,
                             true);
  GuardedBuffer<T> out(size);
  emulated::launch(ek::token_shape(c.n, "test"), [&] {
    ek::forward_kernel<kS, Storage::kF32>(out.data(), tokens.data(), wte.data(), positions.data(),
                                          wpe.data(), c.h);
  });
  emulated::expect_activation_equal<kS>(out.values(), want, what + " forward");
  EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
}

// kernels::embedding_backward as embedding.cu runs it, with std::stable_sort for CUB's radix sort.
template <Storage kS>
std::vector<float> emulated_backward(const Case& c, const std::vector<float>& initial,
                                     const GuardedBuffer<typename StorageOf<kS>::Elem>& dout,
                                     const GuardedBuffer<std::int64_t>& ids) {
  const auto un = static_cast<std::size_t>(c.n);
  GuardedBuffer<std::uint32_t> keys(un), tokens(un);
  emulated::launch(ek::sort_keys_shape(c.n), [&] {
    ek::sort_keys_kernel(keys.data(), tokens.data(), ids.data(), c.n, c.rows, c.vocab_start);
  });
  std::vector<std::size_t> order(un);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::vector<std::uint32_t> unsorted_keys = keys.values(), unsorted_tokens = tokens.values();
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return unsorted_keys[a] < unsorted_keys[b];
  });
  std::vector<std::uint32_t> sorted_keys(un), sorted_tokens(un);
  for (std::size_t p = 0; p < un; ++p) {
    sorted_keys[p] = unsorted_keys[order[p]];
    sorted_tokens[p] = unsorted_tokens[order[p]];
  }
  const GuardedBuffer<std::uint32_t> d_sorted_keys(sorted_keys), d_sorted_tokens(sorted_tokens);
  GuardedBuffer<float> dtable(initial);
  emulated::launch(ek::accumulate_shape(c.n, c.h), [&] {
    ek::accumulate_kernel<kS>(dtable.data(), dout.data(), d_sorted_keys.data(),
                              d_sorted_tokens.data(), c.n, c.h, c.rows);
  });
  EXPECT_EQ(
      keys.guard_bytes_written() + tokens.guard_bytes_written() + dtable.guard_bytes_written(), 0u);
  return dtable.values();
}

template <Storage kS>
void check_backward(const Case& c) {
  const std::string what = describe(c, kS);
  const GuardedBuffer<typename StorageOf<kS>::Elem> dout(
      to_storage<kS>(emulated::random_floats(static_cast<std::size_t>(c.n * c.h), 66)));
  const GuardedBuffer<std::int64_t> ids(random_ids(c, 67));
  // Gradients accumulate: start from non-zero values.
  const std::vector<float> initial =
      emulated::random_floats(static_cast<std::size_t>(c.rows * c.h), 68);
  std::vector<float> want = initial;
  ops::cpu::embedding_backward(want.data(), to_fp32<kS>(dout.values()).data(), ids.data(), c.n, c.h,
                               c.rows, c.vocab_start);
  // Each row's tokens in token order, as the CPU adds them: the same float additions.
  const std::vector<float> got = emulated_backward<kS>(c, initial, dout, ids);
  EXPECT_EQ(got, want) << what << " backward";
  EXPECT_EQ(bits_of(emulated_backward<kS>(c, initial, dout, ids)), bits_of(got))
      << what << " rerun";
}

bool unsharded(const Case& c) {
  return c.vocab_start == 0 && c.id_limit <= c.rows;
}

TEST(KernelsEmulatedEmbedding, LookupIsBitIdenticalToCpu) {
  for (const Case& c : kCases) check_lookup<Storage::kF32>(c);
  for (const Case& c : k16BitCases) {
    check_lookup<Storage::kBF16>(c);
    check_lookup<Storage::kF16>(c);
  }
}

TEST(KernelsEmulatedEmbedding, TokenPlusPositionIsBitIdenticalToCpu) {
  for (const Case& c : kCases) {
    if (unsharded(c)) check_forward<Storage::kF32>(c);
  }
  for (const Case& c : k16BitCases) {
    if (!unsharded(c)) continue;
    check_forward<Storage::kBF16>(c);
    check_forward<Storage::kF16>(c);
  }
}

TEST(KernelsEmulatedEmbedding, BackwardIsBitIdenticalToCpuAndRepeats) {
  for (const Case& c : kCases) check_backward<Storage::kF32>(c);
  for (const Case& c : k16BitCases) {
    check_backward<Storage::kBF16>(c);
    check_backward<Storage::kF16>(c);
  }
}

// 16-bit tables (kP = kS, widened on load) against the same tables widened to fp32 (kP = kF32) and
// against ops::cpu::embedding_lookup reading the 16-bit table: the lookup (plain, added, on a
// shard some ids miss) and the token + position forward, bit for bit.
template <Storage kS>
void check_16bit_tables(const Case& c) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = describe(c, kS);
  const auto size = static_cast<std::size_t>(c.n * c.h);
  const std::int64_t max_positions = 97;
  const GuardedBuffer<T> wte16(
      to_storage<kS>(emulated::random_floats(static_cast<std::size_t>(c.rows * c.h), 70)));
  const GuardedBuffer<T> wpe16(
      to_storage<kS>(emulated::random_floats(static_cast<std::size_t>(max_positions * c.h), 71)));
  const GuardedBuffer<float> wte32(to_fp32<kS>(wte16.values())), wpe32(to_fp32<kS>(wpe16.values()));
  const GuardedBuffer<std::int64_t> ids(random_ids(c, 72));
  std::vector<std::int64_t> position_ids(static_cast<std::size_t>(c.n));
  for (std::size_t t = 0; t < position_ids.size(); ++t) {
    position_ids[t] = static_cast<std::int64_t>(t) % max_positions;
  }
  const GuardedBuffer<std::int64_t> positions(position_ids);
  const std::vector<T> initial = to_storage<kS>(emulated::random_floats(size, 73));
  GuardedBuffer<T> out(size);
  const auto lookup = [&]<Storage kP>(const void* table, bool add) {
    if (add) {
      out.assign(initial);
    } else {
      out.poison();
    }
    emulated::launch(ek::token_shape(c.n, "test"), [&] {
      ek::lookup_kernel<kS, kP>(out.data(), ids.data(), table, c.h, c.rows, c.vocab_start, add);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return bits_of(out.values());
  };
  for (const bool add : {false, true}) {
    const auto got = lookup.template operator()<kS>(wte16.data(), add);
    EXPECT_EQ(got, lookup.template operator()<Storage::kF32>(wte32.data(), add))
        << what << (add ? " lookup add" : " lookup");
    std::vector<float> host = add ? to_fp32<kS>(initial) : std::vector<float>(size);
    ops::cpu::embedding_lookup(host.data(), ids.data(), wte16.data(), StorageOf<kS>::kDType, c.n,
                               c.h, c.rows, c.vocab_start, add);
    EXPECT_EQ(got, bits_of(to_storage<kS>(host))) << what << " against the host, add " << add;
  }
  if (!unsharded(c)) return;
  const auto forward = [&]<Storage kP>(const void* wte, const void* wpe) {
    out.poison();
    emulated::launch(ek::token_shape(c.n, "test"), [&] {
      ek::forward_kernel<kS, kP>(out.data(), ids.data(), wte, positions.data(), wpe, c.h);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return bits_of(out.values());
  };
  EXPECT_EQ(forward.template operator()<kS>(wte16.data(), wpe16.data()),
            forward.template operator()<Storage::kF32>(wte32.data(), wpe32.data()))
      << what << " forward";
}

TEST(KernelsEmulatedEmbedding, SixteenBitTablesEqualTheirFp32Widening) {
  for (const Case& c : k16BitCases) {
    check_16bit_tables<Storage::kBF16>(c);
    check_16bit_tables<Storage::kF16>(c);
  }
  check_16bit_tables<Storage::kBF16>(kCases[0]);  // unsharded, one element
}

TEST(KernelsEmulatedEmbedding, AccumulateRefusesATooWideTable) {
  EXPECT_THROW(ek::accumulate_shape(4, std::int64_t{65536} * 256), base::Error);
  EXPECT_EQ(ek::accumulate_shape(4, std::int64_t{65535} * 256).grid.y, 65535u);
}

}  // namespace
}  // namespace mds
