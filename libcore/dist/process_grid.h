#pragma once
#include <string_view>
#include <vector>

namespace mds::dist {

// The kinds of process groups a TP×PP×DP grid has.
// kModel is DeepSpeed's "model-parallel" group (all P·T ranks of one data-parallel replica, used
// for the grad-norm and overflow reductions); kEmbedding holds the first and last pipeline stage of
// one (dp, tp) pair, which share the tied word embedding.
enum class GroupKind { kTensor, kData, kPipeline, kModel, kEmbedding };

// "tp", "dp", "pp", "mp", "embedding": the names communicators and error lines use.
std::string_view group_name(GroupKind kind);

struct GridCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  bool operator==(const GridCoord&) const = default;
};

// Where a rank sits in the groups of one kind: which group (in upstream's creation order) and its
// position (rank) inside it. index < 0 means the rank belongs to no group of that kind (only
// possible for kEmbedding).
struct GroupMembership {
  int index = -1;
  int position = -1;
};

// Rank arithmetic of a TP×PP×DP grid, with Megatron's (and DeepSpeed's [pipe, data, model])
// order: global rank g = pp·(D·T) + dp·T + tp, so TP groups are consecutive ranks. Pure logic, no
// MPI, so every grid can be checked in one process.
class ProcessGrid {
 public:
  // Fails unless tp, pp >= 1 and tp·pp divides world_size; DP = world_size / (tp·pp).
  ProcessGrid(int world_size, int tp, int pp);

  int world_size() const { return world_; }
  int tp_size() const { return tp_; }
  int pp_size() const { return pp_; }
  int dp_size() const { return dp_; }

  int rank_of(GridCoord coord) const;
  GridCoord coord_of(int rank) const;
  // DeepSpeed's mp_rank inside the model-parallel group: pp·T + tp.
  int mp_rank(int rank) const;
  bool is_first_stage(int rank) const { return coord_of(rank).pp == 0; }
  bool is_last_stage(int rank) const { return coord_of(rank).pp == pp_ - 1; }

  // Every group of a kind, each as ascending global ranks, in the order upstream creates them
  // (Megatron mpu.initialize_model_parallel). With P = 1 an embedding group is the single rank.
  std::vector<std::vector<int>> groups(GroupKind kind) const;
  // The group of `kind` that holds `rank` (empty for an embedding group the rank is not in).
  std::vector<int> group_of(GroupKind kind, int rank) const;
  GroupMembership membership(GroupKind kind, int rank) const;

 private:
  void check_rank(int rank) const;
  void check_coord(GridCoord coord) const;

  int world_;
  int tp_;
  int pp_;
  int dp_;
};

}  // namespace mds::dist
