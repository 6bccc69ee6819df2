#include "kernels/embedding.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/cpu/embedding.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;

struct Case {
  std::int64_t n, h, rows, vocab_start;
  std::int64_t id_limit;  // ids drawn from [0, id_limit): beyond the shard when it exceeds rows
  bool skewed;            // half the tokens share one id (a long run for one row's owner)
};
const Case kCases[] = {{1, 1, 1, 0, 1, false},          {7, 3, 5, 0, 5, false},
                       {300, 257, 50, 0, 50, false},    {1000, 768, 1003, 500, 2500, false},
                       {4099, 64, 7, 0, 7, true},       {2048, 129, 50257, 0, 50257, true},
                       {513, 1000, 300, 300, 900, true}};

std::vector<std::int64_t> random_ids(const Case& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, c.id_limit - 1);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(c.n));
  for (std::size_t t = 0; t < ids.size(); ++t) {
    ids[t] = c.skewed && t % 2 == 0 ? c.vocab_start + c.rows / 2 : dist(rng);
  }
  return ids;
}

TEST(GpuEmbedding, LookupIsBitIdenticalToCpu) {
  for (const Case& c : kCases) {
    for (const bool add : {false, true}) {
      SCOPED_TRACE(testing::Message() << c.n << " tokens, h=" << c.h << ", rows " << c.vocab_start
                                      << "+" << c.rows << (add ? ", add" : ""));
      const auto size = static_cast<std::size_t>(c.n * c.h);
      const auto table = random_floats(static_cast<std::size_t>(c.rows * c.h), 60);
      const auto ids = random_ids(c, 61);
      // With add the output starts from other values; without, from the 0xFF poison.
      const auto initial = random_floats(size, 62);
      std::vector<float> ref = add ? initial : std::vector<float>(size);
      DeviceArray<float> out(size);
      if (add) out.upload(initial);
      ops::cpu::embedding_lookup(ref.data(), ids.data(), table.data(), c.n, c.h, c.rows,
                                 c.vocab_start, add);
      DeviceArray<float> dtable(table);
      DeviceArray<std::int64_t> dids(ids);
      kernels::embedding_lookup(out.get(), dids.get(), dtable.get(), c.n, c.h, c.rows,
                                c.vocab_start, add, nullptr);
      // A copy or one addition per element: exact.
      EXPECT_EQ(out.download(), ref);
    }
  }
}

TEST(GpuEmbedding, TokenPlusPositionIsBitIdenticalToCpu) {
  for (const Case& c : kCases) {
    if (c.vocab_start != 0 || c.id_limit > c.rows) continue;  // unsharded tables only
    SCOPED_TRACE(testing::Message() << c.n << " tokens, h=" << c.h);
    const auto size = static_cast<std::size_t>(c.n * c.h);
    const std::int64_t max_positions = 97;
    const auto wte = random_floats(static_cast<std::size_t>(c.rows * c.h), 63);
    const auto wpe = random_floats(static_cast<std::size_t>(max_positions * c.h), 64);
    const auto tokens = random_ids(c, 65);
    std::vector<std::int64_t> positions(tokens.size());
    for (std::size_t t = 0; t < positions.size(); ++t) {
      positions[t] = static_cast<std::int64_t>(t) % max_positions;
    }
    std::vector<float> ref(size);
    ops::cpu::embedding_lookup(ref.data(), tokens.data(), wte.data(), c.n, c.h, c.rows, 0, false);
    ops::cpu::embedding_lookup(ref.data(), positions.data(), wpe.data(), c.n, c.h, max_positions, 0,
                               true);
    DeviceArray<float> dwte(wte), dwpe(wpe), out(size);
    DeviceArray<std::int64_t> dtokens(tokens), dpositions(positions);
    kernels::embedding_forward(out.get(), dtokens.get(), dwte.get(), dpositions.get(), dwpe.get(),
                               c.n, c.h, nullptr);
    EXPECT_EQ(out.download(), ref);
  }
}

TEST(GpuEmbedding, BackwardIsBitIdenticalToCpuAndRepeats) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message()
                 << c.n << " tokens, h=" << c.h << ", rows " << c.vocab_start << "+" << c.rows);
    const auto table_size = static_cast<std::size_t>(c.rows * c.h);
    const auto dout = random_floats(static_cast<std::size_t>(c.n * c.h), 66);
    const auto ids = random_ids(c, 67);
    // Gradients accumulate: start from non-zero values.
    const auto initial = random_floats(table_size, 68);
    std::vector<float> ref = initial;
    ops::cpu::embedding_backward(ref.data(), dout.data(), ids.data(), c.n, c.h, c.rows,
                                 c.vocab_start);
    DeviceArray<float> ddout(dout);
    DeviceArray<std::int64_t> dids(ids);
    // The CPU adds each row's tokens in token order, so does the kernel: the same float
    // additions in the same order.
    DeviceArray<float> dtable(initial);
    kernels::embedding_backward(dtable.get(), ddout.get(), dids.get(), c.n, c.h, c.rows,
                                c.vocab_start, nullptr);
    EXPECT_EQ(dtable.download(), ref);
    // Caller-owned workspace, twice: the same bits again.
    const std::size_t bytes = kernels::embedding_backward_workspace_bytes(c.n, c.rows);
    DeviceArray<std::uint8_t> workspace(bytes);
    for (int run = 0; run < 2; ++run) {
      DeviceArray<float> again(initial);
      kernels::embedding_backward(again.get(), ddout.get(), dids.get(), c.n, c.h, c.rows,
                                  c.vocab_start, workspace.get(), bytes, nullptr);
      EXPECT_EQ(again.download(), ref);
    }
  }
}

TEST(GpuEmbedding, BackwardRejectsASmallWorkspace) {
  const std::int64_t n = 100, h = 8, rows = 10;
  const std::size_t bytes = kernels::embedding_backward_workspace_bytes(n, rows);
  DeviceArray<float> dtable(static_cast<std::size_t>(rows * h)),
      dout(static_cast<std::size_t>(n * h));
  DeviceArray<std::int64_t> ids(std::vector<std::int64_t>(static_cast<std::size_t>(n), 3));
  DeviceArray<std::uint8_t> workspace(bytes);
  EXPECT_THROW(kernels::embedding_backward(dtable.get(), dout.get(), ids.get(), n, h, rows, 0,
                                           workspace.get(), bytes - 1, nullptr),
               base::Error);
}

}  // namespace
}  // namespace mds
