#include "train/collective_staging.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/error.h"

namespace mds::train {
namespace {

using tensor::DType;

TEST(CollectiveStaging, ChunksAreEvenAndSplitOverTheRanks) {
  const CollectiveStaging staging(1000, tensor::Device{});
  EXPECT_EQ(staging.per_rank_chunk(1), 1000);
  EXPECT_EQ(staging.per_rank_chunk(3), 332);  // 333 rounded down to even: 4-byte aligned slices
  EXPECT_EQ(staging.per_rank_chunk(999), 2);  // never below 2
  EXPECT_EQ(staging.all_reduce_chunk(1), 1000);
  EXPECT_EQ(staging.all_reduce_chunk(3), 996);     // a multiple of 2·3
  EXPECT_EQ(staging.all_reduce_chunk(800), 1600);  // at least 2·ranks
  EXPECT_THROW(CollectiveStaging(1, tensor::Device{}), base::Error);
  EXPECT_THROW(staging.per_rank_chunk(0), base::Error);
}

TEST(CollectiveStaging, SlotsGrowToTheLargestRequestAndStay) {
  CollectiveStaging staging(64, tensor::Device{});
  EXPECT_EQ(staging.bytes(), 0u);
  const tensor::Tensor a = staging.get(CollectiveStaging::Slot::kCollective, DType::kFloat16, 10);
  EXPECT_EQ(a.numel(), 10);
  EXPECT_EQ(staging.bytes(), 20u);
  staging.get(CollectiveStaging::Slot::kCollective, DType::kFloat32, 4);  // fits in 20 bytes
  EXPECT_EQ(staging.bytes(), 20u);
  staging.get(CollectiveStaging::Slot::kWidened, DType::kFloat32, 8);
  EXPECT_EQ(staging.bytes(), 52u);
  staging.get(CollectiveStaging::Slot::kCollective, DType::kFloat32, 16);
  EXPECT_EQ(staging.bytes(), 96u);
}

TEST(CollectiveStaging, ForEachChunkCoversTheRangeOnce) {
  std::vector<Chunk> chunks;
  for_each_chunk(10, 4, [&](const Chunk& c) { chunks.push_back(c); });
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].offset, 0);
  EXPECT_EQ(chunks[1].offset, 4);
  EXPECT_EQ(chunks[2].offset, 8);
  EXPECT_EQ(chunks[2].numel, 2);
  chunks.clear();
  for_each_chunk(0, 4, [&](const Chunk& c) { chunks.push_back(c); });
  EXPECT_TRUE(chunks.empty());
}

}  // namespace
}  // namespace mds::train
