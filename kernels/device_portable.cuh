// The part of device_common.cuh with no CUDA includes: launch shapes, deterministic block
// reductions, the storage of activations (load/store) and the bf16 conversions. Kernel headers
// (kernels/*_kernels.cuh) built on this alone also compile for the CPU under the SIMT emulation of
// the unit tests (tests/unit/simt_emulation.h). The two fp16 conversions are only declared here:
// device_common.cuh defines them with cuda_fp16.h, the emulation with their host twins
// (tests/unit/emulated_device_common.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "base/error.h"
#include "tensor/dtype.h"

namespace mds::kernels::detail {

constexpr int kThreads = 256;  // threads per block of every kernel here
constexpr int kWarps = kThreads / 32;

// A launch's grid, block and dynamic shared memory. The kernel headers compute them in host
// functions that both the .cu launch (launch.cuh) and the CPU emulation call, so the emulation runs
// the real shapes. (CUDA's dim3 needs its headers.)
struct Extent {
  unsigned x = 1, y = 1, z = 1;
};
struct LaunchShape {
  Extent grid;
  Extent block;
  std::size_t shared_bytes = 0;
};

// Blocks for a grid-stride loop over n elements: enough to fill any GPU, never more than needed.
inline unsigned grid_for(std::int64_t n) {
  constexpr std::int64_t kMaxBlocks = 65536;
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// One block per row: rows must fit the grid's x dimension (2^31 − 1).
inline unsigned row_grid(std::int64_t rows, const char* kernel) {
  if (rows > 0x7FFFFFFF) base::fail("cuda: ", kernel, ": ", rows, " rows exceed the grid limit");
  return static_cast<unsigned>(rows);
}

// A grid-stride loop over n elements: grid_for(n) blocks of kThreads.
inline LaunchShape grid_stride_shape(std::int64_t n) {
  return {{grid_for(n)}, {kThreads}};
}

// One block of kThreads per row.
inline LaunchShape row_shape(std::int64_t rows, const char* kernel) {
  return {{row_grid(rows, kernel)}, {kThreads}};
}

// One thread per element, no grid-stride loop: n must stay below 2^31 · kThreads.
inline LaunchShape thread_per_element_shape(std::int64_t n) {
  return {{static_cast<unsigned>((n + kThreads - 1) / kThreads)}, {kThreads}};
}

// Σ over the warp's 32 values, returned to every lane: a fixed butterfly, so every lane ends with
// the same bits and every run with the same result.
template <typename T>
__device__ T warp_sum(T value) {
  for (int delta = 16; delta > 0; delta /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, delta);
  return value;
}

// Σ over the block's kThreads values, returned to every thread. A fixed butterfly inside each
// warp and the warps' sums added in warp order: the same operations every run, so results are
// deterministic. `scratch` holds kWarps values; the call synchronizes the block twice.
template <typename T>
__device__ T block_sum(T value, T* scratch) {
  value = warp_sum(value);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < kWarps; ++w) total += scratch[w];
  return total;
}

// max over the block, skipping NaNs as the CPU's `x > m ? x : m` does.
__device__ inline float block_max(float value, float* scratch) {
  for (int delta = 16; delta > 0; delta /= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, value, delta);
    value = other > value ? other : value;
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < kWarps; ++w) total = scratch[w] > total ? scratch[w] : total;
  return total;
}

// bf16 as tensor::to_bfloat16: round to nearest even, a NaN keeps its top bits and turns quiet.
__device__ inline std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

__device__ inline float bf16_bits_to_float(std::uint16_t bits) {
  return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
}

// fp16, round to nearest even (__float2half_rn on a device, tensor::to_float16 on the host):
// defined by device_common.cuh or by the emulation's host twins.
__device__ inline std::uint16_t float_to_fp16_bits(float value);
__device__ inline float fp16_bits_to_float(std::uint16_t bits);

// The storage of an activation tensor: kernels templated on it load each element widened to fp32
// (exact) and store fp32 results rounded once, so their arithmetic is the fp32 kernel's.
enum class Storage { kF32, kBF16, kF16 };

template <Storage kS>
__device__ inline float load(const void* p, std::int64_t i) {
  if constexpr (kS == Storage::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (kS == Storage::kBF16) {
    return bf16_bits_to_float(static_cast<const std::uint16_t*>(p)[i]);
  } else {
    return fp16_bits_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
}

template <Storage kS>
__device__ inline void store(void* p, std::int64_t i, float value) {
  if constexpr (kS == Storage::kF32) {
    static_cast<float*>(p)[i] = value;
  } else if constexpr (kS == Storage::kBF16) {
    static_cast<std::uint16_t*>(p)[i] = float_to_bf16_bits(value);
  } else {
    static_cast<std::uint16_t*>(p)[i] = float_to_fp16_bits(value);
  }
}

// Sixteen bytes moved in one access: eight elements of a 16-bit storage or four fp32 ones.
struct alignas(16) Bytes16 {
  std::uint32_t w[4];
};

// p 16-byte aligned. Defined by device_common.cuh (one vector access) or by the emulation (which
// checks the alignment).
__device__ inline Bytes16 load_bytes16(const void* p);
__device__ inline void store_bytes16(void* p, const Bytes16& value);
// The same with L2's evict-first hint (ld/st.global.cs): for bytes read or written the last time
// in a while, so that they make room first for those a kernel reads again soon.
__device__ inline Bytes16 load_bytes16_evict_first(const void* p);
__device__ inline void store_bytes16_evict_first(void* p, const Bytes16& value);

template <bool kEvictFirst>
__device__ inline Bytes16 load_bytes16_hinted(const void* p) {
  if constexpr (kEvictFirst) {
    return load_bytes16_evict_first(p);
  } else {
    return load_bytes16(p);
  }
}

template <bool kEvictFirst>
__device__ inline void store_bytes16_hinted(void* p, const Bytes16& value) {
  if constexpr (kEvictFirst) {
    store_bytes16_evict_first(p, value);
  } else {
    store_bytes16(p, value);
  }
}

template <Storage kS>
__device__ inline float widen_bits(std::uint32_t bits16) {
  if constexpr (kS == Storage::kBF16) {
    return bf16_bits_to_float(static_cast<std::uint16_t>(bits16));
  } else {
    return fp16_bits_to_float(static_cast<std::uint16_t>(bits16));
  }
}

template <Storage kS>
__device__ inline std::uint32_t round_bits(float value) {
  if constexpr (kS == Storage::kBF16) {
    return float_to_bf16_bits(value);
  } else {
    return float_to_fp16_bits(value);
  }
}

// Elements [i, i + 8) as stored: one 16-byte access of a 16-bit storage, two of fp32. Holding
// the bytes rather than the widened floats takes half the registers of a 16-bit row, so that
// kernels bound by memory latency can keep several rows' loads in flight (sum_columns8).
template <Storage kS>
struct Raw8 {
  Bytes16 b[kS == Storage::kF32 ? 2 : 1];
};

// p 16-byte aligned, i % 8 == 0.
template <Storage kS, bool kEvictFirst = false>
__device__ inline Raw8<kS> load_raw8(const void* p, std::int64_t i) {
  Raw8<kS> raw;
  if constexpr (kS == Storage::kF32) {
    for (int half = 0; half < 2; ++half)
      raw.b[half] = load_bytes16_hinted<kEvictFirst>(static_cast<const float*>(p) + i + 4 * half);
  } else {
    raw.b[0] = load_bytes16_hinted<kEvictFirst>(static_cast<const std::uint16_t*>(p) + i);
  }
  return raw;
}

// The eight elements of `raw` as load<kS> gives them.
template <Storage kS>
__device__ inline void widen8(const Raw8<kS>& raw, float (&v)[8]) {
  if constexpr (kS == Storage::kF32) {
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 4; ++j) v[4 * half + j] = __uint_as_float(raw.b[half].w[j]);
    }
  } else {
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = widen_bits<kS>(raw.b[0].w[j] & 0xFFFFu);
      v[2 * j + 1] = widen_bits<kS>(raw.b[0].w[j] >> 16);
    }
  }
}

// Elements [i, i + 8) as load<kS> gives them, in one 16-byte access (two for fp32): i % 8 == 0
// and p 16-byte aligned. Eight elements a thread keep more bytes in flight than one: the
// elementwise kernels are bound by memory latency, not by their arithmetic.
template <Storage kS, bool kEvictFirst = false>
__device__ inline void load8(const void* p, std::int64_t i, float (&v)[8]) {
  widen8<kS>(load_raw8<kS, kEvictFirst>(p, i), v);
}

// Elements [i, i + 8) stored as store<kS> stores them, likewise.
template <Storage kS, bool kEvictFirst = false>
__device__ inline void store8(void* p, std::int64_t i, const float (&v)[8]) {
  if constexpr (kS == Storage::kF32) {
    for (int half = 0; half < 2; ++half) {
      Bytes16 b;
      for (int j = 0; j < 4; ++j) b.w[j] = __float_as_uint(v[4 * half + j]);
      store_bytes16_hinted<kEvictFirst>(static_cast<float*>(p) + i + 4 * half, b);
    }
  } else {
    Bytes16 b;
    for (int j = 0; j < 4; ++j)
      b.w[j] = round_bits<kS>(v[2 * j]) | round_bits<kS>(v[2 * j + 1]) << 16;
    store_bytes16_hinted<kEvictFirst>(static_cast<std::uint16_t*>(p) + i, b);
  }
}

// Elements [8k, 8k + 8) of x plus, when bias is not null, its columns 8k mod cols … (a chunk within
// one row: cols a multiple of 8), added as the one-element kernels add them.
template <Storage kS, Storage kP>
__device__ inline void load8_plus_bias(const void* x, const void* bias, std::int64_t k,
                                       std::int64_t cols, float (&v)[8]) {
  load8<kS>(x, 8 * k, v);
  if (bias == nullptr) return;
  float b[8];
  load8<kP>(bias, 8 * k % cols, b);
  for (int j = 0; j < 8; ++j) v[j] = v[j] + b[j];
}

// Whether the eight-a-thread kernels (load8/store8, load8_plus_bias) may serve n elements in rows
// of cols with these arrays and bias (null: then cols is unused): n a multiple of 8, cols too with
// a bias (a chunk then lies within one row), every pointer 16-byte aligned.
inline bool fits_chunks_of_8(std::int64_t n, std::int64_t cols, const void* bias,
                             std::initializer_list<const void*> arrays) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (n % 8 != 0 || (bias != nullptr && (cols % 8 != 0 || !aligned(bias)))) return false;
  for (const void* p : arrays) {
    if (!aligned(p)) return false;
  }
  return true;
}

// The eight-a-thread kernels: a grid-stride loop over the n / 8 chunks.
inline LaunchShape chunks_of_8_shape(std::int64_t n) {
  return grid_stride_shape(n / 8);
}

// p moved on by i elements stored as kS (the start of a slice of a flat buffer).
template <Storage kS>
__device__ inline const void* advance(const void* p, std::int64_t i) {
  constexpr std::int64_t kBytes = kS == Storage::kF32 ? 4 : 2;
  return static_cast<const char*>(p) + i * kBytes;
}

// fp32, bf16 or fp16; anything else fails with one line naming the kernel.
inline Storage storage_of(tensor::DType dtype, const char* kernel) {
  switch (dtype) {
    case tensor::DType::kFloat32:
      return Storage::kF32;
    case tensor::DType::kBFloat16:
      return Storage::kBF16;
    case tensor::DType::kFloat16:
      return Storage::kF16;
    default:
      base::fail("kernels::", kernel, ": dtype ", tensor::dtype_name(dtype),
                 " is not float32, bfloat16 or float16");
  }
}

// Calls body(storage as a compile-time constant) for a launch templated on the storage.
template <typename Body>
void with_storage(tensor::DType dtype, const char* kernel, Body body) {
  switch (storage_of(dtype, kernel)) {
    case Storage::kF32:
      return body(std::integral_constant<Storage, Storage::kF32>{});
    case Storage::kBF16:
      return body(std::integral_constant<Storage, Storage::kBF16>{});
    case Storage::kF16:
      return body(std::integral_constant<Storage, Storage::kF16>{});
  }
}

// Calls body(activation storage, parameter storage), both compile-time constants, for a launch
// templated on the two: parameters (LayerNorm weights, biases, embedding tables) are fp32 or stored
// as the activations are (a 16-bit model keeps every parameter in its 16-bit type), so only five
// pairs exist. Any other fails with one line naming the kernel.
template <typename Body>
void with_storages(tensor::DType dtype, tensor::DType param_dtype, const char* kernel, Body body) {
  with_storage(dtype, kernel, [&](auto s) {
    if (param_dtype == tensor::DType::kFloat32) {
      return body(s, std::integral_constant<Storage, Storage::kF32>{});
    }
    if (param_dtype != dtype) {
      base::fail("kernels::", kernel, ": parameters of dtype ", tensor::dtype_name(param_dtype),
                 " with activations of ", tensor::dtype_name(dtype),
                 " (parameters must be float32 or the activations' dtype)");
    }
    if constexpr (decltype(s)::value != Storage::kF32) return body(s, s);
  });
}

}  // namespace mds::kernels::detail
