#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.h"
#include "kernels/elementwise_kernels.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

using tensor::DType;

namespace {

using detail::launch;
using detail::Storage;
using detail::storage_of;
using namespace elementwise_detail;

template <Storage kOut, Storage kIn>
void launch_cast_pieces(void* out, const void* x, const PieceStart* starts, std::int64_t count,
                        std::int64_t total, float factor, cudaStream_t stream) {
  launch("kernels::cast_pieces", cast_pieces_kernel<kOut, kIn>, pieces_launch_shape(total), stream,
         out, x, starts, count, factor);
}

template <Storage kOut>
void launch_cast(void* out, const void* x, Storage in, std::int64_t n, cudaStream_t stream) {
  switch (in) {
    case Storage::kF32:
      return launch("kernels::cast", cast_kernel<kOut, Storage::kF32>, launch_shape(n), stream, out,
                    x, n);
    case Storage::kBF16:
      return launch("kernels::cast", cast_kernel<kOut, Storage::kBF16>, launch_shape(n), stream,
                    out, x, n);
    case Storage::kF16:
      return launch("kernels::cast", cast_kernel<kOut, Storage::kF16>, launch_shape(n), stream, out,
                    x, n);
  }
}

}  // namespace

void add(void* out, const void* a, const void* b, DType dtype, std::int64_t n,
         cudaStream_t stream) {
  detail::with_storage(dtype, "add", [&](auto s) {
    if (n <= 0) return;
    launch("kernels::add", add_kernel<decltype(s)::value>, launch_shape(n), stream, out, a, b, n);
  });
}

void add(float* out, const float* a, const float* b, std::int64_t n, cudaStream_t stream) {
  add(out, a, b, DType::kFloat32, n, stream);
}

void scale(void* out, const void* x, float factor, DType dtype, std::int64_t n,
           cudaStream_t stream) {
  detail::with_storage(dtype, "scale", [&](auto s) {
    if (n <= 0) return;
    launch("kernels::scale", scale_kernel<decltype(s)::value>, launch_shape(n), stream, out, x,
           factor, n);
  });
}

void scale(float* out, const float* x, float factor, std::int64_t n, cudaStream_t stream) {
  scale(out, x, factor, DType::kFloat32, n, stream);
}

void fill(void* out, DType dtype, float value, std::int64_t n, cudaStream_t stream) {
  const Storage storage = storage_of(dtype, "fill");
  if (n <= 0) return;
  if (value == 0.0f && !std::signbit(value)) {
    // +0 is all zero bits in every storage: the copy engine's memset runs at the memory's speed,
    // where the 2-byte stores of fill16_kernel reached a quarter of it (the backward's scratch
    // gradients, 4% of a GPT-2 124M bf16 step on an H100).
    check_cuda(
        cudaMemsetAsync(out, 0, static_cast<std::size_t>(n) * tensor::dtype_size(dtype), stream),
        "kernels::fill (cudaMemsetAsync)");
    return;
  }
  if (storage == Storage::kF32) {
    launch("kernels::fill", fill_kernel, launch_shape(n), stream, static_cast<float*>(out), value,
           n);
  } else {
    launch("kernels::fill", fill16_kernel, launch_shape(n), stream,
           static_cast<std::uint16_t*>(out), bits16(value, storage), n);
  }
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
      return launch_cast<Storage::kF32>(out, x, in_storage, n, stream);
    case Storage::kBF16:
      return launch_cast<Storage::kBF16>(out, x, in_storage, n, stream);
    case Storage::kF16:
      return launch_cast<Storage::kF16>(out, x, in_storage, n, stream);
  }
}

void cast_pieces(void* out, DType out_dtype, const void* x, DType x_dtype,
                 std::span<const ops::CastPiece> pieces, float factor, cudaStream_t stream,
                 Scratch* scratch) {
  const Storage out_storage = storage_of(out_dtype, "cast_pieces");
  const Storage in_storage = storage_of(x_dtype, "cast_pieces");
  std::vector<PieceStart> starts;
  starts.reserve(pieces.size() + 1);
  std::int64_t total = 0;
  for (const ops::CastPiece& piece : pieces) {
    if (piece.numel <= 0) continue;
    starts.push_back({total, piece.out, piece.in});
    total += piece.numel;
  }
  if (total == 0) return;
  const auto count = static_cast<std::int64_t>(starts.size());
  starts.push_back({total, 0, 0});
  const std::size_t bytes = starts.size() * sizeof(PieceStart);
  const CallScratch table(scratch, bytes, stream);
  auto* device_starts = static_cast<PieceStart*>(table.data());
  // From pageable memory: staged before the call returns, so `starts` may go.
  check_cuda(cudaMemcpyAsync(device_starts, starts.data(), bytes, cudaMemcpyHostToDevice, stream),
             "kernels::cast_pieces (copy the pieces)");
  const auto with_input = [&]<Storage kOut>() {
    switch (in_storage) {
      case Storage::kF32:
        return launch_cast_pieces<kOut, Storage::kF32>(out, x, device_starts, count, total, factor,
                                                       stream);
      case Storage::kBF16:
        return launch_cast_pieces<kOut, Storage::kBF16>(out, x, device_starts, count, total, factor,
                                                        stream);
      case Storage::kF16:
        return launch_cast_pieces<kOut, Storage::kF16>(out, x, device_starts, count, total, factor,
                                                       stream);
    }
  };
  switch (out_storage) {
    case Storage::kF32:
      with_input.template operator()<Storage::kF32>();
      break;
    case Storage::kBF16:
      with_input.template operator()<Storage::kBF16>();
      break;
    case Storage::kF16:
      with_input.template operator()<Storage::kF16>();
      break;
  }
}

}  // namespace mds::kernels
