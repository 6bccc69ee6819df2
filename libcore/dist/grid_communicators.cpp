#include "dist/grid_communicators.h"

#include <string>

#include "base/error.h"

namespace mds::dist {

Communicator* GridCommunicators::get(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTensor:
      return tp.get();
    case GroupKind::kData:
      return dp.get();
    case GroupKind::kPipeline:
      return pp.get();
    case GroupKind::kModel:
      return mp.get();
    case GroupKind::kEmbedding:
      return embedding.get();
  }
  return nullptr;
}

GridCommunicators make_grid_communicators(MpiCommunicator& world, const ProcessGrid& grid) {
  if (grid.world_size() != world.size()) {
    base::fail("dist: the process grid (TP=", grid.tp_size(), " PP=", grid.pp_size(),
               " DP=", grid.dp_size(), ") needs ", grid.world_size(), " ranks, but ", world.size(),
               " were started");
  }
  const int rank = world.rank();
  auto make = [&](GroupKind kind) -> std::unique_ptr<Communicator> {
    const GroupMembership m = grid.membership(kind, rank);
    return world.split(std::string(group_name(kind)), m.index, m.position);
  };
  GridCommunicators out;
  out.tp = make(GroupKind::kTensor);
  out.dp = make(GroupKind::kData);
  out.pp = make(GroupKind::kPipeline);
  out.mp = make(GroupKind::kModel);
  out.embedding = make(GroupKind::kEmbedding);
  return out;
}

}  // namespace mds::dist
