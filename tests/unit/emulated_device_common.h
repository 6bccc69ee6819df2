// What the kernels built on kernels/device_portable.cuh need to run under the SIMT emulation
// (tests/unit/simt_emulation.h): its fixed-`__shared__`-array mode, the host twins of the two fp16
// conversions device_common.cuh defines with cuda_fp16.h (tensor::to_float16 rounds to nearest even
// as __float2half_rn; NaN payloads may differ), and the launch of a kernel header's LaunchShape as
// kernels/launch.cuh launches it. Include this first, then the kernel header.
#pragma once
#ifndef MDS_SIMT_SHARED_ARRAYS
#define MDS_SIMT_SHARED_ARRAYS
#endif
#include "tests/unit/simt_emulation.h"
#ifndef MDS_SIMT_SHARED_ARRAYS_ON
#error "simt_emulation.h was included before this header, without MDS_SIMT_SHARED_ARRAYS"
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "kernels/device_portable.cuh"
#include "tensor/dtype.h"

namespace mds::kernels::detail {

inline std::uint16_t float_to_fp16_bits(float value) {
  return tensor::to_float16(value).bits;
}

inline float fp16_bits_to_float(std::uint16_t bits) {
  return tensor::to_float(tensor::Float16{bits});
}

// A misaligned 16-byte access faults on a GPU: here it stops the test.
inline void check_aligned_16(const void* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
    std::fprintf(stderr, "emulation: 16-byte access at %p, not 16-byte aligned\n", p);
    std::abort();
  }
}

inline Bytes16 load_bytes16(const void* p) {
  check_aligned_16(p);
  Bytes16 value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

inline void store_bytes16(void* p, const Bytes16& value) {
  check_aligned_16(p);
  std::memcpy(p, &value, sizeof(value));
}

// Cache hints change nothing a program can see.
inline Bytes16 load_bytes16_evict_first(const void* p) {
  return load_bytes16(p);
}

inline void store_bytes16_evict_first(void* p, const Bytes16& value) {
  store_bytes16(p, value);
}

}  // namespace mds::kernels::detail

namespace mds::emulated {

// The emulation's launch for `shape`; launch.cuh opts a kernel into its dynamic shared memory
// when that exceeds the 48 KiB default, so the opt-in here is the shape's own size.
inline simt::Launch launch_of(const kernels::detail::LaunchShape& shape) {
  simt::Launch config;
  config.grid = {shape.grid.x, shape.grid.y, shape.grid.z};
  config.block = {shape.block.x, shape.block.y, shape.block.z};
  config.dynamic_shared_bytes = shape.shared_bytes;
  if (shape.shared_bytes > config.max_dynamic_shared_bytes) {
    config.max_dynamic_shared_bytes = shape.shared_bytes;
  }
  return config;
}

// Runs `body` (a call of the kernel) over the blocks of `shape`.
inline void launch(const kernels::detail::LaunchShape& shape, const std::function<void()>& body) {
  simt::launch(launch_of(shape), body);
}

// The same kernel over a grid of only `blocks` blocks across: for grid-stride loops, whose real
// shapes only wrap past 2^24 elements, to run the wrap at a size the emulation can afford.
inline void launch_narrowed(kernels::detail::LaunchShape shape, unsigned blocks,
                            const std::function<void()>& body) {
  shape.grid.x = blocks;
  launch(shape, body);
}

}  // namespace mds::emulated
