#pragma once
#include <memory>

#include "dist/mpi_communicator.h"
#include "dist/process_grid.h"

namespace mds::dist {

// This rank's communicators of a TP×PP×DP grid, named "tp", "dp", "pp", "mp" (DeepSpeed's
// model-parallel group) and "embedding" (null on ranks that are neither first nor last stage).
// Group ranks follow ProcessGrid::membership positions, so the TP rank is the tp coordinate, the
// mp rank is pp·T + tp, and so on.
struct GridCommunicators {
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> mp;
  std::unique_ptr<Communicator> embedding;

  Communicator* get(GroupKind kind) const;
};

// Collective over `world`; fails unless the grid's world size is world.size().
GridCommunicators make_grid_communicators(MpiCommunicator& world, const ProcessGrid& grid);

}  // namespace mds::dist
