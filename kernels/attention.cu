#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/attention_io_cuda.cuh"
#include "kernels/attention_keep_bits.cuh"
#include "kernels/attention_kernels.cuh"
#include "kernels/attention_tc.h"
#include "kernels/check.h"
#include "kernels/head_dim_dispatch.cuh"

namespace mds::kernels {

namespace {

using detail::with_head_dim;
using namespace attention_detail;
using attention_io::with_io;

// Shared memory of each kernel: `tiles` row tiles of kTile × (hn + 1) floats plus `pair_tiles`
// [kTile][kPairLd] tiles plus `rows` per-row floats.
std::size_t shared_bytes(std::int64_t hn, int tiles, int pair_tiles, int rows) {
  return sizeof(float) *
         (static_cast<std::size_t>(tiles) * kTile * static_cast<std::size_t>(hn + 1) +
          static_cast<std::size_t>(pair_tiles) * kTile * kPairLd +
          static_cast<std::size_t>(rows) * kTile);
}

template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes, const char* what) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             what);
}

struct Launch {
  Geometry geometry;
  dim3 grid;
  float alpha;
};

// Grid x: the b·np slices; grid y: the tiles of 32 rows. The keep bits are written by the
// forward and only read by the backward (Dropout holds one pointer for both).
Launch launch_of(const ops::cpu::AttentionDims& d, float coeff, const ops::DropoutStream& dropout,
                 const std::uint32_t* keep_bits, const char* op) {
  const std::int64_t slices = d.b * d.np, tiles = (d.s + kTile - 1) / kTile;
  if (slices > 0x7FFFFFFF || tiles > 65535) {
    base::fail("cuda: kernels::", op, ": b·np = ", slices, " or s = ", d.s, " exceeds the grid");
  }
  if (!(coeff >= 1.0f)) base::fail("cuda: kernels::", op, ": coeff must be >= 1, got ", coeff);
  if (!(dropout.p >= 0.0f && dropout.p < 1.0f)) {
    base::fail("cuda: kernels::", op, ": dropout probability must be in [0, 1), got ", dropout.p);
  }
  // As ops/cpu/attention.cpp's score_alpha.
  const float alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(d.hn)) * coeff));
  Dropout drop;
  drop.p = dropout.p;
  // As ops/cpu/dropout.cpp's keep_scale: 1/(1 − p) in double, rounded once.
  drop.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(dropout.p)));
  drop.seed = dropout.seed;
  drop.offset = dropout.offset;
  drop.np = d.np;
  drop.first_head = d.first_head;
  drop.stream_heads = d.stream_heads > 0 ? d.stream_heads : d.np;
  if (dropout.p > 0.0f && keep_bits != nullptr) {
    if (reinterpret_cast<std::uintptr_t>(keep_bits) % 8 != 0) {
      base::fail("cuda: kernels::", op, ": keep_bits must be 8-byte aligned");
    }
    drop.keep_bits = const_cast<std::uint32_t*>(keep_bits);
  }
  return {{d.s, d.b * d.np * 3 * d.hn, d.b * d.np * d.hn, drop},
          dim3(static_cast<unsigned>(slices), static_cast<unsigned>(tiles)),
          alpha};
}

bool aligned_16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Whether a call runs on the tensor-core kernels (attention.h's AttentionKernel).
bool use_tensor_cores(AttentionKernel kernel, tensor::DType dtype, std::int64_t hn,
                      std::initializer_list<const void*> pointers, const char* op) {
  if (kernel == AttentionKernel::kSimt) return false;
  bool aligned = true;
  for (const void* p : pointers) aligned = aligned && aligned_16(p);
  const bool fits = attention_tensor_core_supported(dtype, hn) && aligned;
  const bool forced = kernel != AttentionKernel::kAuto;  // kSimt returned above
  if (forced && !fits) {
    base::fail("cuda: kernels::", op, ": the tensor-core kernels need bf16/fp16, head dim 64 or ",
               "128 and 16-byte aligned pointers (got ", tensor::dtype_name(dtype), ", head dim ",
               hn, aligned ? ")" : ", a misaligned pointer)");
  }
  return fits;
}

}  // namespace

bool attention_head_dim_supported(std::int64_t hn) {
  return hn == 8 || hn == 16 || hn == 32 || hn == 64 || hn == 96 || hn == 128;
}

std::int64_t attention_keep_words(std::int64_t s) {
  return keep_words(s);
}

bool attention_tensor_core_supported(tensor::DType dtype, std::int64_t hn) {
  return (dtype == tensor::DType::kBFloat16 || dtype == tensor::DType::kFloat16) &&
         attention_tc::head_dim_supported(hn);
}

void attention_forward(void* ctx, float* lse, const void* qkv, tensor::DType dtype,
                       ops::cpu::AttentionDims d, float coeff, const ops::DropoutStream& dropout,
                       cudaStream_t stream, AttentionKernel kernel, std::uint32_t* keep_bits) {
  if (d.s <= 0 || d.b <= 0 || d.np <= 0) return;
  const Launch at = launch_of(d, coeff, dropout, keep_bits, "attention_forward");
  if (use_tensor_cores(kernel, dtype, d.hn, {ctx, qkv}, "attention_forward")) {
    attention_tc::forward(
        ctx, lse, qkv, dtype == tensor::DType::kBFloat16, d.hn, at.geometry, d.b * d.np, at.alpha,
        coeff, {.two_atoms_a_warp = kernel == AttentionKernel::kTensorCoreTrialShapes}, stream);
    return;
  }
  with_io(dtype, "attention_forward", [&](auto io) {
    using Io = decltype(io);
    using Elem = typename Io::Elem;
    with_head_dim(d.hn, "attention_forward", [&](auto hn) {
      constexpr int kHn = decltype(hn)::value;
      const std::size_t bytes = shared_bytes(kHn, 3, 1, 2);
      allow_shared(forward_kernel<kHn, Io>, bytes, "kernels::attention_forward (shared memory)");
      forward_kernel<kHn, Io><<<at.grid, kThreads, bytes, stream>>>(static_cast<Elem*>(ctx), lse,
                                                                    static_cast<const Elem*>(qkv),
                                                                    at.geometry, at.alpha, coeff);
    });
  });
  check_launch("kernels::attention_forward");
  if (at.geometry.dropout.keep_bits != nullptr) {
    keep_bits_kernel<<<at.grid, kThreads, 0, stream>>>(at.geometry);
    check_launch("kernels::attention_forward (keep bits)");
  }
}

void attention_backward(void* dqkv, const void* dctx, const void* ctx, const float* lse,
                        const void* qkv, tensor::DType dtype, ops::cpu::AttentionDims d,
                        float coeff, const ops::DropoutStream& dropout, cudaStream_t stream,
                        AttentionKernel kernel, bool accumulate, const std::uint32_t* keep_bits,
                        Scratch* scratch) {
  if (d.s <= 0 || d.b <= 0 || d.np <= 0) return;
  const Launch at = launch_of(d, coeff, dropout, keep_bits, "attention_backward");
  if (use_tensor_cores(kernel, dtype, d.hn, {dqkv, dctx, ctx, qkv}, "attention_backward")) {
    attention_tc::backward(
        dqkv, dctx, ctx, lse, qkv, dtype == tensor::DType::kBFloat16, d.hn, at.geometry, d.b * d.np,
        at.alpha, coeff, accumulate,
        {.dq_from_stored_ds = kernel != AttentionKernel::kTensorCoreRecomputingDq,
         .trial_shapes = kernel == AttentionKernel::kTensorCoreTrialShapes},
        stream, scratch);
    return;
  }
  if (!accumulate) {  // the SIMT kernels only add: onto zeros (dqkv is s rows of qkv_ld elements)
    check_cuda(
        cudaMemsetAsync(
            dqkv, 0, static_cast<std::size_t>(d.s * at.geometry.qkv_ld) * tensor::dtype_size(dtype),
            stream),
        "kernels::attention_backward (zero fill)");
  }
  with_io(dtype, "attention_backward", [&](auto io) {
    using Io = decltype(io);
    using Elem = typename Io::Elem;
    auto* dqkv_e = static_cast<Elem*>(dqkv);
    const auto *dctx_e = static_cast<const Elem*>(dctx), *ctx_e = static_cast<const Elem*>(ctx),
               *qkv_e = static_cast<const Elem*>(qkv);
    with_head_dim(d.hn, "attention_backward", [&](auto hn) {
      constexpr int kHn = decltype(hn)::value;
      const std::size_t dkdv_bytes = shared_bytes(kHn, 4, 2, 0);
      allow_shared(dkdv_kernel<kHn, Io>, dkdv_bytes, "kernels::attention_backward (shared memory)");
      dkdv_kernel<kHn, Io><<<at.grid, kThreads, dkdv_bytes, stream>>>(
          dqkv_e, dctx_e, ctx_e, lse, qkv_e, at.geometry, at.alpha, coeff);
      check_launch("kernels::attention_backward (dk, dv)");
      const std::size_t dq_bytes = shared_bytes(kHn, 4, 1, 0);
      allow_shared(dq_kernel<kHn, Io>, dq_bytes, "kernels::attention_backward (shared memory)");
      dq_kernel<kHn, Io><<<at.grid, kThreads, dq_bytes, stream>>>(dqkv_e, dctx_e, ctx_e, lse, qkv_e,
                                                                  at.geometry, at.alpha, coeff);
    });
  });
  check_launch("kernels::attention_backward (dq)");
}

void attention_forward(float* ctx, float* lse, const float* qkv, ops::cpu::AttentionDims d,
                       float coeff, const ops::DropoutStream& dropout, cudaStream_t stream) {
  attention_forward(static_cast<void*>(ctx), lse, static_cast<const void*>(qkv),
                    tensor::DType::kFloat32, d, coeff, dropout, stream);
}

void attention_backward(float* dqkv, const float* dctx, const float* ctx, const float* lse,
                        const float* qkv, ops::cpu::AttentionDims d, float coeff,
                        const ops::DropoutStream& dropout, cudaStream_t stream) {
  attention_backward(static_cast<void*>(dqkv), static_cast<const void*>(dctx),
                     static_cast<const void*>(ctx), lse, static_cast<const void*>(qkv),
                     tensor::DType::kFloat32, d, coeff, dropout, stream);
}

}  // namespace mds::kernels
