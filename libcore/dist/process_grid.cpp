#include "dist/process_grid.h"

#include <algorithm>

#include "base/error.h"

namespace mds::dist {

std::string_view group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor:
      return "tp";
    case GroupKind::kData:
      return "dp";
    case GroupKind::kPipeline:
      return "pp";
    case GroupKind::kModel:
      return "mp";
    case GroupKind::kEmbedding:
      return "embedding";
  }
  return "?";
}

ProcessGrid::ProcessGrid(int world_size, int tp, int pp) : world_(world_size), tp_(tp), pp_(pp) {
  if (world_size < 1 || tp < 1 || pp < 1) {
    base::fail("process grid: world size ", world_size, ", tensor-model-parallel size ", tp,
               " and pipeline-model-parallel size ", pp, " must all be at least 1");
  }
  if (world_size % (tp * pp) != 0) {
    base::fail("process grid: world size ", world_size,
               " is not divisible by tensor-model-parallel size ", tp,
               " x pipeline-model-parallel size ", pp, " = ", tp * pp);
  }
  dp_ = world_size / (tp * pp);
}

void ProcessGrid::check_rank(int rank) const {
  if (rank < 0 || rank >= world_)
    base::fail("process grid: rank ", rank, " outside [0, ", world_, ")");
}

void ProcessGrid::check_coord(GridCoord c) const {
  if (c.tp < 0 || c.tp >= tp_ || c.dp < 0 || c.dp >= dp_ || c.pp < 0 || c.pp >= pp_) {
    base::fail("process grid: coordinate (tp ", c.tp, ", dp ", c.dp, ", pp ", c.pp,
               ") outside the grid TP=", tp_, " DP=", dp_, " PP=", pp_);
  }
}

int ProcessGrid::rank_of(GridCoord c) const {
  check_coord(c);
  return c.pp * (dp_ * tp_) + c.dp * tp_ + c.tp;
}

GridCoord ProcessGrid::coord_of(int rank) const {
  check_rank(rank);
  return {rank % tp_, (rank / tp_) % dp_, rank / (tp_ * dp_)};
}

int ProcessGrid::mp_rank(int rank) const {
  const GridCoord c = coord_of(rank);
  return c.pp * tp_ + c.tp;
}

std::vector<std::vector<int>> ProcessGrid::groups(GroupKind kind) const {
  std::vector<std::vector<int>> out;
  switch (kind) {
    case GroupKind::kTensor:
      for (int pp = 0; pp < pp_; ++pp) {
        for (int dp = 0; dp < dp_; ++dp) {
          std::vector<int>& g = out.emplace_back();
          for (int tp = 0; tp < tp_; ++tp) g.push_back(rank_of({tp, dp, pp}));
        }
      }
      break;
    case GroupKind::kData:
      for (int pp = 0; pp < pp_; ++pp) {
        for (int tp = 0; tp < tp_; ++tp) {
          std::vector<int>& g = out.emplace_back();
          for (int dp = 0; dp < dp_; ++dp) g.push_back(rank_of({tp, dp, pp}));
        }
      }
      break;
    case GroupKind::kModel:
      for (int dp = 0; dp < dp_; ++dp) {
        std::vector<int>& g = out.emplace_back();
        for (int pp = 0; pp < pp_; ++pp) {
          for (int tp = 0; tp < tp_; ++tp) g.push_back(rank_of({tp, dp, pp}));
        }
      }
      break;
    case GroupKind::kPipeline:
    case GroupKind::kEmbedding:
      // Upstream's pipeline group i is range(i, W, D·T); i = dp·T + tp.
      for (int dp = 0; dp < dp_; ++dp) {
        for (int tp = 0; tp < tp_; ++tp) {
          std::vector<int>& g = out.emplace_back();
          if (kind == GroupKind::kPipeline) {
            for (int pp = 0; pp < pp_; ++pp) g.push_back(rank_of({tp, dp, pp}));
          } else {
            g.push_back(rank_of({tp, dp, 0}));
            if (pp_ > 1) g.push_back(rank_of({tp, dp, pp_ - 1}));
          }
        }
      }
      break;
  }
  return out;
}

GroupMembership ProcessGrid::membership(GroupKind kind, int rank) const {
  check_rank(rank);
  const std::vector<std::vector<int>> all = groups(kind);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto it = std::find(all[i].begin(), all[i].end(), rank);
    if (it != all[i].end()) {
      return {static_cast<int>(i), static_cast<int>(it - all[i].begin())};
    }
  }
  return {};
}

std::vector<int> ProcessGrid::group_of(GroupKind kind, int rank) const {
  const GroupMembership m = membership(kind, rank);
  if (m.index < 0) return {};
  return groups(kind)[static_cast<std::size_t>(m.index)];
}

}  // namespace mds::dist
