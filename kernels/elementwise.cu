#include "base/error.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.h"

namespace mds::kernels {

using tensor::DType;

namespace {

using detail::grid_for;
using detail::kThreads;
using detail::load;
using detail::Storage;
using detail::storage_of;
using detail::store;

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

template <Storage kS>
__global__ void add_kernel(void* out, const void* a, const void* b, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kS>(out, i, load<kS>(a, i) + load<kS>(b, i));
}

template <Storage kS>
__global__ void scale_kernel(void* out, const void* x, float factor, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kS>(out, i, load<kS>(x, i) * factor);
}

__global__ void fill_kernel(float* out, float value, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = value;
}

__global__ void fill16_kernel(std::uint16_t* out, std::uint16_t bits, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = bits;
}

template <Storage kOut, Storage kIn>
__global__ void cast_kernel(void* out, const void* x, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kOut>(out, i, load<kIn>(x, i));
}

// The host-side twin of float_to_*_bits, for fill's value.
std::uint16_t bits16(float value, Storage storage) {
  return storage == Storage::kBF16 ? tensor::to_bfloat16(value).bits
                                   : tensor::to_float16(value).bits;
}

template <Storage kOut>
void launch_cast(void* out, const void* x, Storage in, std::int64_t n, cudaStream_t stream) {
  switch (in) {
    case Storage::kF32:
      cast_kernel<kOut, Storage::kF32><<<grid_for(n), kThreads, 0, stream>>>(out, x, n);
      break;
    case Storage::kBF16:
      cast_kernel<kOut, Storage::kBF16><<<grid_for(n), kThreads, 0, stream>>>(out, x, n);
      break;
    case Storage::kF16:
      cast_kernel<kOut, Storage::kF16><<<grid_for(n), kThreads, 0, stream>>>(out, x, n);
      break;
  }
}

}  // namespace

void add(void* out, const void* a, const void* b, DType dtype, std::int64_t n,
         cudaStream_t stream) {
  detail::with_storage(dtype, "add", [&](auto s) {
    if (n <= 0) return;
    add_kernel<decltype(s)::value><<<grid_for(n), kThreads, 0, stream>>>(out, a, b, n);
    check_launch("kernels::add");
  });
}

void add(float* out, const float* a, const float* b, std::int64_t n, cudaStream_t stream) {
  add(out, a, b, DType::kFloat32, n, stream);
}

void scale(void* out, const void* x, float factor, DType dtype, std::int64_t n,
           cudaStream_t stream) {
  detail::with_storage(dtype, "scale", [&](auto s) {
    if (n <= 0) return;
    scale_kernel<decltype(s)::value><<<grid_for(n), kThreads, 0, stream>>>(out, x, factor, n);
    check_launch("kernels::scale");
  });
}

void scale(float* out, const float* x, float factor, std::int64_t n, cudaStream_t stream) {
  scale(out, x, factor, DType::kFloat32, n, stream);
}

void fill(void* out, DType dtype, float value, std::int64_t n, cudaStream_t stream) {
  const Storage storage = storage_of(dtype, "fill");
  if (n <= 0) return;
  if (storage == Storage::kF32) {
    fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<float*>(out), value, n);
  } else {
    fill16_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<std::uint16_t*>(out),
                                                        bits16(value, storage), n);
  }
  check_launch("kernels::fill");
}

void cast(void* out, DType out_dtype, const void* x, DType x_dtype, std::int64_t n,
          cudaStream_t stream) {
  const Storage out_storage = storage_of(out_dtype, "cast");
  const Storage in_storage = storage_of(x_dtype, "cast");
  if (n <= 0) return;
  if (out_storage == in_storage) {
    if (out == x) return;
    check_cuda(cudaMemcpyAsync(out, x, static_cast<std::size_t>(n) * tensor::dtype_size(x_dtype),
                               cudaMemcpyDeviceToDevice, stream),
               "kernels::cast (copy)");
    return;
  }
  switch (out_storage) {
    case Storage::kF32:
      launch_cast<Storage::kF32>(out, x, in_storage, n, stream);
      break;
    case Storage::kBF16:
      launch_cast<Storage::kBF16>(out, x, in_storage, n, stream);
      break;
    case Storage::kF16:
      launch_cast<Storage::kF16>(out, x, in_storage, n, stream);
      break;
  }
  check_launch("kernels::cast");
}

}  // namespace mds::kernels
