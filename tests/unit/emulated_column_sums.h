// A column sum (kernels/reduce_columns.cuh) under the SIMT emulation, as kernels/launch.cuh's
// launch_column_sums runs it: the family's kernel with column_shape(rows, cols) (or its own
// shape) writing poisoned, guarded partials, zeroed counters, and its tiles' last blocks adding
// the sums onto the outputs. The blocks run in a scrambled order (simt's default), so which block
// of a tile finishes it changes from launch to launch; the counters must be zero again after it.
// Include tests/unit/emulated_device_common.h first.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/reduce_columns.cuh"
#include "tests/unit/guarded_buffer.h"

namespace mds::emulated {

// `stage(sink)` calls the kernel with its ColumnSink argument; `shape` is its launch
// (column_shape, or column8_shape for a kernel calling sum_columns8).
template <int kSums, typename Stage>
void launch_column_sums(const kernels::detail::LaunchShape& shape, std::int64_t rows,
                        std::int64_t cols, kernels::detail::ColumnOutputs<kSums> outputs,
                        Stage stage) {
  if (rows <= 0 || cols <= 0) return;  // as launch_column_sums
  const std::int64_t chunks = shape.grid.y;
  GuardedBuffer<float> partials(static_cast<std::size_t>(kSums * chunks * cols));
  partials.poison();
  GuardedBuffer<unsigned> counters(std::vector<unsigned>(shape.grid.x, 0u));
  const kernels::detail::ColumnSink<kSums> sink{partials.data(), counters.data(), outputs};
  launch(shape, [&] { stage(sink); });
  EXPECT_EQ(partials.guard_bytes_written(), 0u) << "column sum partials";
  EXPECT_EQ(counters.guard_bytes_written(), 0u) << "column sum counters";
  EXPECT_EQ(counters.values(), std::vector<unsigned>(shape.grid.x, 0u))
      << "counters not left at zero";
}

template <int kSums, typename Stage>
void launch_column_sums(std::int64_t rows, std::int64_t cols,
                        kernels::detail::ColumnOutputs<kSums> outputs, Stage stage) {
  launch_column_sums<kSums>(kernels::detail::column_shape(rows, cols), rows, cols, outputs, stage);
}

}  // namespace mds::emulated
