// The storage policies of the attention kernels (attention_kernels.cuh, decode_attention_kernels
// .cuh): the kernels are templated on an `Io` giving the element type of the activations, loads
// widened exactly to fp32 and stores rounded once; everything else they hold (shared tiles,
// scores, accumulators, lse) is fp32. Fp32Io, plain float access, is the fp32 kernels; the 16-bit
// ones are attention_io_cuda.cuh's (device_common.cuh's conversions) and, for the CPU emulation
// tests, their host twins. Plain CUDA with no runtime includes (see attention_kernels.cuh).
#pragma once
#include <cstdint>

namespace mds::kernels::attention_io {

struct Fp32Io {
  using Elem = float;
  __device__ static float load(const float* p, std::int64_t i) { return p[i]; }
  __device__ static void store(float* p, std::int64_t i, float value) { p[i] = value; }
};

}  // namespace mds::kernels::attention_io
