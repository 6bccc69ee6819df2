// Launches a kernel with the LaunchShape its header computes (device_portable.cuh), so that the
// .cu and the CPU emulation of the unit tests run the same shapes; checks the launch. Included by
// the .cu files only.
#pragma once
#include <cuda_runtime.h>

#include "kernels/check.h"
#include "kernels/column_sum_scratch.h"
#include "kernels/device_portable.cuh"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels::detail {

inline dim3 dim3_of(Extent e) {
  return dim3(e.x, e.y, e.z);
}

// kernel<<<shape>>>(args…) on `stream`, then check_launch(name). Dynamic shared memory over the
// 48 KiB every kernel may use is opted into first (allow_dynamic_shared_memory).
template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), const LaunchShape& shape,
            cudaStream_t stream, Args... args) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), shape.shared_bytes, name);
  kernel<<<dim3_of(shape.grid), dim3_of(shape.block), shape.shared_bytes, stream>>>(
      static_cast<Params>(args)...);
  check_launch(name);
}

// A column sum (reduce_columns.cuh): `kernel`, whose last parameter is the ColumnSink<kSums> its
// sum_columns (or sum_columns8) writes, over [rows, cols], its tiles' last blocks adding the sums
// onto `outputs`; partials and counters from `scratch` (this stream's). `shape` is
// column_shape(rows, cols) for a kernel calling sum_columns, column8_shape for one calling
// sum_columns8.
template <int kSums, typename... Params, typename... Args>
void launch_column_sums(const char* name, void (*kernel)(Params...), const LaunchShape& shape,
                        std::int64_t rows, std::int64_t cols, ColumnOutputs<kSums> outputs,
                        ColumnSumScratch& scratch, cudaStream_t stream, Args... args) {
  if (rows <= 0 || cols <= 0) return;
  const std::int64_t chunks = shape.grid.y;  // the row chunks, one partial sum each
  const ColumnSink<kSums> sink{
      scratch.partials(static_cast<std::size_t>(kSums * chunks * cols), stream),
      scratch.counters(shape.grid.x, stream), outputs};
  launch(name, kernel, shape, stream, args..., sink);
}

template <int kSums, typename... Params, typename... Args>
void launch_column_sums(const char* name, void (*kernel)(Params...), std::int64_t rows,
                        std::int64_t cols, ColumnOutputs<kSums> outputs, ColumnSumScratch& scratch,
                        cudaStream_t stream, Args... args) {
  launch_column_sums<kSums>(name, kernel, column_shape(rows, cols), rows, cols, outputs, scratch,
                            stream, args...);
}

}  // namespace mds::kernels::detail
