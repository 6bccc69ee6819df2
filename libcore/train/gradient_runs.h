// Which parts of the flat gradient buffer a backward has finished, as runs ready to be reduced
// (train/overlapped_all_reduce.h, train/overlapped_reduce_to_owners.h). Each table parameter owns a
// piece of the buffer running to the next parameter's offset (or the buffer's end), so alignment
// padding travels with the parameter before it. A run is a maximal stretch of adjacent pieces
// that are ready, not started and not held; ready() hands out the runs that have grown to a
// bucket, rest() every piece left once the backward is over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/param_table.h"

namespace mds::train {

class GradientRuns {
 public:
  // Pieces [first, end) of the buffer order, elements [begin, begin + numel).
  struct Run {
    std::size_t first = 0, end = 0;
    std::int64_t begin = 0, numel = 0;
  };

  // `table` must outlive this.
  explicit GradientRuns(const model::ParamTable& table);

  std::size_t size() const { return begins_.size(); }
  std::size_t piece_of(std::size_t param) const;  // fails naming an index outside the table
  const model::ParamSpec& spec(std::size_t piece) const { return (*table_)[params_[piece]]; }
  std::size_t param(std::size_t piece) const { return params_[piece]; }
  Run run(std::size_t first, std::size_t end) const;  // pieces [first, end)
  std::int64_t numel() const { return ends_.empty() ? 0 : ends_.back(); }

  // A held piece never joins a run (rest() skips it too); its owner starts it.
  void hold(std::size_t param) { held_[piece_of(param)] = true; }
  bool held(std::size_t piece) const { return held_[piece]; }
  bool started(std::size_t piece) const { return started_[piece]; }
  void mark_started(std::size_t piece) { started_[piece] = true; }
  bool all_started() const;

  // A new backward: nothing ready or started (holds stay).
  void reset();
  // Marks `params` ready (each once per backward, else an Error naming it) and returns the runs
  // around them that hold at least `bucket_numel` elements, marked started.
  std::vector<Run> ready(std::span<const std::size_t> params, std::int64_t bucket_numel);
  // Every run of pieces neither started nor held, ready or not, marked started.
  std::vector<Run> rest();

 private:
  bool waiting(std::size_t piece) const {
    return ready_[piece] && !started_[piece] && !held_[piece];
  }
  Run take(std::size_t first, std::size_t end);

  const model::ParamTable* table_;
  std::vector<std::size_t> piece_of_param_;
  std::vector<std::size_t> params_;  // piece -> table index
  std::vector<std::int64_t> begins_, ends_;
  std::vector<bool> ready_, started_, held_;
};

}  // namespace mds::train
