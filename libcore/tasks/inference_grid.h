// Which tensor × pipeline grid evaluate and generate run on (issue 6): one process merges any
// checkpoint into the whole model; W > 1 ranks (mpirun, srun) run one model replica of T × P
// ranks (no data parallelism), T and P defaulting to the checkpoint's own sizes. Pure logic.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/pretrain_args.h"

namespace mds::tasks {

struct GridSizes {
  std::int64_t tp = 1;
  std::int64_t pp = 1;
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
// (`saved`), and W must equal T·P. The sizes must also fit the model: T divides the heads, the
// FFN width and the padded vocabulary, P is at most the layer count.
GridChoice choose_inference_grid(int world_size, const RequestedGrid& requested,
                                 const GridSizes& saved, const config::PretrainArgs& model,
                                 std::int64_t padded_vocab);

}  // namespace mds::tasks
