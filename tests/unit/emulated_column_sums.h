// The two launches of a column sum (kernels/reduce_columns.cuh) under the SIMT emulation, as
// kernels/launch.cuh's launch_column_sums runs them: the family's kernel with column_shape(rows,
// cols) writing poisoned, guarded partials, then finish_column_sums_kernel onto the outputs.
// Include tests/unit/emulated_device_common.h first.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "kernels/reduce_columns.cuh"
#include "tests/unit/guarded_buffer.h"

namespace mds::emulated {

// `stage(partials)` calls the kernel with its partials argument; `shape` is its launch
// (column_shape, or column8_shape for a kernel calling sum_columns8).
template <int kSums, typename Stage>
void launch_column_sums(const kernels::detail::LaunchShape& shape, std::int64_t rows,
                        std::int64_t cols, kernels::detail::ColumnOutputs<kSums> outputs,
                        Stage stage) {
  namespace kd = kernels::detail;
  if (rows <= 0 || cols <= 0) return;  // as launch_column_sums
  const std::int64_t chunks = shape.grid.y;
  GuardedBuffer<float> partials(static_cast<std::size_t>(kSums * chunks * cols));
  partials.poison();
  launch(shape, [&] { stage(partials.data()); });
  launch(kd::column_finish_shape(cols),
         [&] { kd::finish_column_sums_kernel<kSums>(partials.data(), chunks, cols, outputs); });
  EXPECT_EQ(partials.guard_bytes_written(), 0u) << "column sum partials";
}

template <int kSums, typename Stage>
void launch_column_sums(std::int64_t rows, std::int64_t cols,
                        kernels::detail::ColumnOutputs<kSums> outputs, Stage stage) {
  launch_column_sums<kSums>(kernels::detail::column_shape(rows, cols), rows, cols, outputs, stage);
}

}  // namespace mds::emulated
