// Which tensor × pipeline × data grid evaluate and generate run on (issue 6): one process merges
// any checkpoint into the whole model; W > 1 ranks (mpirun, srun) run model replicas of T × P
// ranks, T and P defaulting to the checkpoint's own sizes: generate one replica, evaluate
// W / (T·P) replicas that split the windows or examples. Pure logic.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/pretrain_args.h"

namespace mds::tasks {

struct GridSizes {
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t dp = 1;  // model replicas (W / (T·P)); the checkpoint's own grid leaves it 1
  bool operator==(const GridSizes&) const = default;
};

// --tensor-model-parallel-size / --pipeline-model-parallel-size when given on the command line
// (args.given_flags), nullopt for a size left at its default.
struct RequestedGrid {
  std::optional<std::int64_t> tp;
  std::optional<std::int64_t> pp;
};
RequestedGrid requested_grid(const config::PretrainArgs& args);

// The grid to run, or the one line saying why there is none.
struct GridChoice {
  GridSizes sizes;
  std::string error;  // empty when `sizes` is usable
};

// World size 1: T = P = 1 (the checkpoint is merged on load); sizes given with T·P > 1 are an
// error naming the ranks to launch. World size W > 1: each size not given is the checkpoint's
// (`saved`), and W must equal T·P — or, with `data_parallel`, be a multiple of it (D = W / (T·P)).
// The sizes must also fit the model: T divides the heads, the FFN width and the padded
// vocabulary, P is at most the layer count.
GridChoice choose_inference_grid(int world_size, const RequestedGrid& requested,
                                 const GridSizes& saved, const config::PretrainArgs& model,
                                 std::int64_t padded_vocab, bool data_parallel = false);

}  // namespace mds::tasks
