#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/attention_io_cuda.cuh"
#include "kernels/attention_keep_bits.cuh"
#include "kernels/attention_kernels.cuh"
#include "kernels/attention_tc.h"
#include "kernels/check.h"
#include "kernels/head_dim_dispatch.cuh"
#include "kernels/variant_trials.h"

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
                 const std::uint32_t* keep_bits, const float* key_bias, const char* op) {
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
  return {{d.s, d.b * d.np * 3 * d.hn, d.b * d.np * d.hn, drop, key_bias},
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

// What a trial's pick is kept under: the problem as the kernels see it.
std::string problem_key(const char* op, tensor::DType dtype, const ops::cpu::AttentionDims& d,
                        const Geometry& g) {
  std::string key = std::string(op) + " " + std::string(tensor::dtype_name(dtype)) +
                    " s=" + std::to_string(d.s) + " b=" + std::to_string(d.b) +
                    " np=" + std::to_string(d.np) + " hn=" + std::to_string(d.hn);
  if (g.dropout.p > 0.0f)
    key += g.dropout.keep_bits != nullptr ? " dropout, keep bits" : " dropout";
  if (g.key_bias != nullptr) key += " alibi";
  return key;
}

// Whether the tensor-core shapes under trial apply: hn = 64 (at 128 there is one shape).
bool has_shape_trials(AttentionKernel kernel, const ops::LaunchVariantChoices* variants,
                      std::int64_t hn) {
  return variants != nullptr && kernel == AttentionKernel::kAuto && hn == 64;
}

// The forward's shape (attention_tc::ForwardChoices::two_atoms_a_warp) picked for this problem,
// timed on its first call: ctx and lse are written by the trials and again by the caller.
bool forward_two_atoms(ops::LaunchVariantChoices& variants, void* ctx, float* lse, const void* qkv,
                       tensor::DType dtype, const ops::cpu::AttentionDims& d, const Launch& at,
                       float coeff, cudaStream_t stream) {
  const std::string key = problem_key("attention_forward", dtype, d, at.geometry);
  const std::int64_t slices = d.b * d.np;
  const bool bf16 = dtype == tensor::DType::kBFloat16;
  if (!variants.find(key) && attention_tc::draws_keep_bits_first(at.geometry, slices)) {
    attention_tc::draw_keep_bits(at.geometry, slices, stream);  // the trials read them
  }
  const auto elem = static_cast<std::size_t>(tensor::dtype_size(dtype));
  const std::vector<TrialOutput> outputs = {
      {ctx, static_cast<std::size_t>(d.s * at.geometry.ctx_ld) * elem},
      {lse, static_cast<std::size_t>(slices * d.s) * sizeof(float)}};
  return choose_variant(
             variants, key, {"blocks of 64 rows", "two atoms a warp"},
             [&](int v) {
               attention_tc::forward(ctx, lse, qkv, bf16, d.hn, at.geometry, slices, at.alpha,
                                     coeff, {.two_atoms_a_warp = v == 1, .draw = false}, stream);
             },
             outputs, stream) == 1;
}

// The backward's shapes picked for this problem, timed on its first call into a scratch dqkv
// (written whole, not accumulated, so every run gives the same bytes).
attention_tc::BackwardChoices backward_shapes(ops::LaunchVariantChoices& variants, const void* dctx,
                                              const void* ctx, const float* lse, const void* qkv,
                                              tensor::DType dtype, const ops::cpu::AttentionDims& d,
                                              const Launch& at, float coeff, cudaStream_t stream,
                                              Scratch* scratch) {
  const std::string key = problem_key("attention_backward", dtype, d, at.geometry);
  const auto shapes = [](int v) {
    return attention_tc::BackwardChoices{.dkdv_short_steps = (v & 1) != 0,
                                         .dq_two_atoms = (v & 2) != 0};
  };
  if (const std::optional<int> known = variants.find(key)) return shapes(*known);
  const std::size_t bytes = static_cast<std::size_t>(d.s * at.geometry.qkv_ld) *
                            static_cast<std::size_t>(tensor::dtype_size(dtype));
  const TrialBuffer dqkv(bytes, stream);
  if (dqkv.data() == nullptr) {
    variants.record_default(key, kNoTrialMemory);
    return shapes(0);
  }
  const int chosen = choose_variant(
      variants, key,
      {"default", "dk/dv 32-row steps", "dq two atoms", "dk/dv 32-row steps, dq two atoms"},
      [&](int v) {
        attention_tc::backward(dqkv.data(), dctx, ctx, lse, qkv, dtype == tensor::DType::kBFloat16,
                               d.hn, at.geometry, d.b * d.np, at.alpha, coeff, false, shapes(v),
                               stream, scratch);
      },
      {{dqkv.data(), bytes}}, stream);
  return shapes(chosen);
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
                       cudaStream_t stream, AttentionKernel kernel, std::uint32_t* keep_bits,
                       ops::LaunchVariantChoices* variants, const float* key_bias) {
  if (d.s <= 0 || d.b <= 0 || d.np <= 0) return;
  const Launch at = launch_of(d, coeff, dropout, keep_bits, key_bias, "attention_forward");
  if (use_tensor_cores(kernel, dtype, d.hn, {ctx, qkv}, "attention_forward")) {
    bool two_atoms = kernel == AttentionKernel::kTensorCoreTrialShapes;
    if (has_shape_trials(kernel, variants, d.hn)) {
      two_atoms = forward_two_atoms(*variants, ctx, lse, qkv, dtype, d, at, coeff, stream);
    }
    attention_tc::forward(ctx, lse, qkv, dtype == tensor::DType::kBFloat16, d.hn, at.geometry,
                          d.b * d.np, at.alpha, coeff, {.two_atoms_a_warp = two_atoms}, stream);
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
                        Scratch* scratch, ops::LaunchVariantChoices* variants,
                        const float* key_bias) {
  if (d.s <= 0 || d.b <= 0 || d.np <= 0) return;
  const Launch at = launch_of(d, coeff, dropout, keep_bits, key_bias, "attention_backward");
  if (use_tensor_cores(kernel, dtype, d.hn, {dqkv, dctx, ctx, qkv}, "attention_backward")) {
    const bool trial = kernel == AttentionKernel::kTensorCoreTrialShapes;
    attention_tc::BackwardChoices choices{
        .dq_from_stored_ds = kernel != AttentionKernel::kTensorCoreRecomputingDq,
        .dkdv_short_steps = trial,
        .dq_two_atoms = trial};
    if (has_shape_trials(kernel, variants, d.hn)) {
      choices =
          backward_shapes(*variants, dctx, ctx, lse, qkv, dtype, d, at, coeff, stream, scratch);
    }
    attention_tc::backward(dqkv, dctx, ctx, lse, qkv, dtype == tensor::DType::kBFloat16, d.hn,
                           at.geometry, d.b * d.np, at.alpha, coeff, accumulate, choices, stream,
                           scratch);
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
