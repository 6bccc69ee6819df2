#include "dist/process_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "base/error.h"

namespace mds::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(DistProcessGrid, HandWrittenTables2x2x2) {
  const ProcessGrid grid(8, 2, 2);
  EXPECT_EQ(grid.dp_size(), 2);
  EXPECT_EQ(grid.groups(GroupKind::kTensor), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(grid.groups(GroupKind::kData), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(grid.groups(GroupKind::kPipeline), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(grid.groups(GroupKind::kModel), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(grid.groups(GroupKind::kEmbedding), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(grid.coord_of(6), (GridCoord{0, 1, 1}));
  EXPECT_EQ(grid.rank_of({1, 0, 1}), 5);
  EXPECT_EQ(grid.mp_rank(5), 3);  // pp 1 · T 2 + tp 1
  EXPECT_EQ(grid.mp_rank(2), 0);
  EXPECT_EQ(grid.group_of(GroupKind::kData, 7), (std::vector<int>{5, 7}));
  const GroupMembership m = grid.membership(GroupKind::kModel, 6);
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(m.position, 2);
}

TEST(DistProcessGrid, HandWrittenEmbeddingWithFourStages) {
  const ProcessGrid grid(8, 1, 4);  // D = 2
  EXPECT_EQ(grid.groups(GroupKind::kPipeline), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(grid.groups(GroupKind::kEmbedding), (Groups{{0, 6}, {1, 7}}));
  EXPECT_TRUE(grid.group_of(GroupKind::kEmbedding, 2).empty());
  EXPECT_EQ(grid.membership(GroupKind::kEmbedding, 4).index, -1);
  EXPECT_EQ(grid.membership(GroupKind::kEmbedding, 7).position, 1);
}

TEST(DistProcessGrid, SingleStageEmbeddingIsOneRank) {
  const ProcessGrid grid(4, 2, 1);
  EXPECT_EQ(grid.groups(GroupKind::kEmbedding), (Groups{{0}, {1}, {2}, {3}}));
}

// Every grid with T·P·D <= 8 against the formula g = pp·(D·T) + dp·T + tp.
TEST(DistProcessGrid, EveryGridUpToEightRanksMatchesFormula) {
  int grids = 0;
  for (int t = 1; t <= 8; ++t) {
    for (int p = 1; t * p <= 8; ++p) {
      for (int d = 1; t * p * d <= 8; ++d) {
        ++grids;
        const int w = t * p * d;
        const ProcessGrid grid(w, t, p);
        ASSERT_EQ(grid.dp_size(), d);
        auto g = [&](int tp, int dp, int pp) { return pp * (d * t) + dp * t + tp; };
        for (int pp = 0; pp < p; ++pp) {
          for (int dp = 0; dp < d; ++dp) {
            for (int tp = 0; tp < t; ++tp) {
              const int rank = g(tp, dp, pp);
              ASSERT_EQ(grid.rank_of({tp, dp, pp}), rank);
              ASSERT_EQ(grid.coord_of(rank), (GridCoord{tp, dp, pp}));
              ASSERT_EQ(grid.mp_rank(rank), pp * t + tp);
              std::vector<int> tp_group, dp_group, pp_group, mp_group, emb_group;
              for (int i = 0; i < t; ++i) tp_group.push_back(g(i, dp, pp));
              for (int i = 0; i < d; ++i) dp_group.push_back(g(tp, i, pp));
              for (int i = 0; i < p; ++i) pp_group.push_back(g(tp, dp, i));
              for (int i = 0; i < p; ++i) {
                for (int j = 0; j < t; ++j) mp_group.push_back(g(j, dp, i));
              }
              if (pp == 0 || pp == p - 1) {
                emb_group.push_back(g(tp, dp, 0));
                if (p > 1) emb_group.push_back(g(tp, dp, p - 1));
              }
              ASSERT_EQ(grid.group_of(GroupKind::kTensor, rank), tp_group);
              ASSERT_EQ(grid.group_of(GroupKind::kData, rank), dp_group);
              ASSERT_EQ(grid.group_of(GroupKind::kPipeline, rank), pp_group);
              ASSERT_EQ(grid.group_of(GroupKind::kModel, rank), mp_group);
              ASSERT_EQ(grid.group_of(GroupKind::kEmbedding, rank), emb_group);
              // Position in a group is the coordinate along that axis.
              ASSERT_EQ(grid.membership(GroupKind::kTensor, rank).position, tp);
              ASSERT_EQ(grid.membership(GroupKind::kData, rank).position, dp);
              ASSERT_EQ(grid.membership(GroupKind::kPipeline, rank).position, pp);
              ASSERT_EQ(grid.membership(GroupKind::kModel, rank).position, pp * t + tp);
            }
          }
        }
        // Each kind except embedding partitions the world.
        for (GroupKind kind :
             {GroupKind::kTensor, GroupKind::kData, GroupKind::kPipeline, GroupKind::kModel}) {
          std::vector<int> all;
          for (const auto& group : grid.groups(kind))
            all.insert(all.end(), group.begin(), group.end());
          std::sort(all.begin(), all.end());
          ASSERT_EQ(all.size(), static_cast<std::size_t>(w)) << group_name(kind);
          ASSERT_EQ(std::set<int>(all.begin(), all.end()).size(), static_cast<std::size_t>(w));
        }
      }
    }
  }
  EXPECT_EQ(grids, 38);  // Σ over m ≤ 8 of ordered factorisations of m into 3 factors
}

TEST(DistProcessGrid, IndivisibleWorldNamesAllThreeNumbers) {
  try {
    ProcessGrid grid(6, 4, 1);
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("world size 6"), std::string::npos) << message;
    EXPECT_NE(message.find("tensor-model-parallel size 4"), std::string::npos) << message;
    EXPECT_NE(message.find("pipeline-model-parallel size 1"), std::string::npos) << message;
  }
  EXPECT_THROW(ProcessGrid(8, 3, 1), base::Error);
  EXPECT_THROW(ProcessGrid(8, 0, 1), base::Error);
  EXPECT_THROW(ProcessGrid(8, 2, 2).coord_of(8), base::Error);
}

TEST(DistProcessGrid, GroupNames) {
  EXPECT_EQ(group_name(GroupKind::kTensor), "tp");
  EXPECT_EQ(group_name(GroupKind::kData), "dp");
  EXPECT_EQ(group_name(GroupKind::kPipeline), "pp");
  EXPECT_EQ(group_name(GroupKind::kModel), "mp");
  EXPECT_EQ(group_name(GroupKind::kEmbedding), "embedding");
}

}  // namespace
}  // namespace mds::dist
