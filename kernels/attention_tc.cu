#include "kernels/attention_tc.h"

#include <type_traits>

#include "base/error.h"
#include "kernels/attention_tc_draw.cuh"
#include "kernels/attention_tc_kernels.cuh"
#include "kernels/check.h"

namespace mds::kernels::attention_tc {

namespace {

using namespace attention_tc_detail;

// The most memory the backward's stored dSᵀ may take (dq_from_ds_kernel); past it dq_kernel
// computes dS again instead.
constexpr std::size_t kMaxStoredDsBytes = std::size_t{2} << 30;

template <typename Kernel>
void allow_shared(Kernel kernel, int bytes, const char* what) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             what);
}

// Blocks of `rows` query rows (or keys) each.
dim3 grid_of(std::int64_t slices, std::int64_t s, const char* op, int rows = kBlockRows) {
  const std::int64_t tiles = (s + rows - 1) / rows;
  if (slices > 0x7FFFFFFF || tiles > 65535) {
    base::fail("cuda: kernels::", op, ": b·np = ", slices, " or s = ", s, " exceeds the grid");
  }
  return dim3(static_cast<unsigned>(slices), static_cast<unsigned>(tiles));
}

// body(T{}, std::integral_constant<int, hn>{}) for the element type and head dim.
template <typename Body>
void with_instance(bool bf16, std::int64_t hn, const char* op, Body body) {
  const auto with_type = [&](auto type) {
    switch (hn) {
      case 64:
        return body(type, std::integral_constant<int, 64>{});
      case 128:
        return body(type, std::integral_constant<int, 128>{});
      default:
        base::fail("cuda: kernels::", op, ": the tensor-core kernels have no head dim ", hn,
                   " (64 or 128)");
    }
  };
  if (bf16) {
    with_type(mma::Bf16{});
  } else {
    with_type(mma::Fp16{});
  }
}

}  // namespace

bool head_dim_supported(std::int64_t hn) {
  return hn == 64 || hn == 128;
}

bool draws_keep_bits_first(const attention_detail::Geometry& g, std::int64_t slices) {
  return g.dropout.p > 0.0f && g.dropout.keep_bits != nullptr && g.s % 8 == 0 &&
         keep_bits_draw_launch(slices, g.s).fits;
}

void draw_keep_bits(const attention_detail::Geometry& g, std::int64_t slices, cudaStream_t stream) {
  const KeepBitsLaunch shape = keep_bits_draw_launch(slices, g.s);
  draw_keep_bits_kernel<<<dim3(shape.groups, shape.slices), shape.threads, 0, stream>>>(g);
  check_launch("kernels::attention_forward (keep bits)");
}

void forward(void* ctx, float* lse, const void* qkv, bool bf16, std::int64_t hn,
             const attention_detail::Geometry& g, std::int64_t slices, float alpha, float coeff,
             ForwardChoices choices, cudaStream_t stream) {
  // With keep bits to store and whole Philox blocks per word, the bits are drawn first and read.
  const bool draw_first = draws_keep_bits_first(g, slices);
  if (draw_first && choices.draw) draw_keep_bits(g, slices, stream);
  with_instance(bf16, hn, "attention_forward", [&](auto type, auto head_dim) {
    using T = decltype(type);
    constexpr int kHn = decltype(head_dim)::value;
    // forward_kernel<…, kAtoms> over blocks of kAtomBlockRows<kAtoms> query rows.
    const auto launch = [&](auto kernel, auto atoms) {
      constexpr int kAtoms = decltype(atoms)::value;
      constexpr int bytes = kForwardSharedBytes<kHn, kAtoms>;
      allow_shared(kernel, bytes, "kernels::attention_forward (shared memory)");
      kernel<<<grid_of(slices, g.s, "attention_forward", kAtomBlockRows<kAtoms>), kThreads, bytes,
               stream>>>(static_cast<std::uint16_t*>(ctx), lse,
                         static_cast<const std::uint16_t*>(qkv), g, alpha, coeff);
    };
    constexpr std::integral_constant<int, 1> kOne;
    constexpr std::integral_constant<int, kHn == 64 ? 2 : 1> kTwo;  // two atoms at hn = 64 only
    const bool two_atoms = choices.two_atoms_a_warp && kHn == 64;
    if (draw_first) {
      if (two_atoms) {
        launch(forward_kernel<T, kHn, true, kTwo.value>, kTwo);
      } else {
        launch(forward_kernel<T, kHn, true>, kOne);
      }
    } else if (two_atoms) {
      launch(forward_kernel<T, kHn, false, kTwo.value>, kTwo);
    } else {
      launch(forward_kernel<T, kHn, false>, kOne);
    }
  });
  check_launch("kernels::attention_forward (tensor cores)");
}

void backward(void* dqkv, const void* dctx, const void* ctx, const float* lse, const void* qkv,
              bool bf16, std::int64_t hn, const attention_detail::Geometry& g, std::int64_t slices,
              float alpha, float coeff, bool accumulate, BackwardChoices choices,
              cudaStream_t stream, Scratch* scratch) {
  const dim3 grid = grid_of(slices, g.s, "attention_backward");
  auto* dqkv_h = static_cast<std::uint16_t*>(dqkv);
  const auto* dctx_h = static_cast<const std::uint16_t*>(dctx);
  const auto* ctx_h = static_cast<const std::uint16_t*>(ctx);
  const auto* qkv_h = static_cast<const std::uint16_t*>(qkv);
  // Each row's delta = dctx·ctx, stored for dkdv_kernel, then dSᵀ where dq comes from it (up to
  // kMaxStoredDsBytes: 201 MB for a GPT-2 124M layer at micro-batch 8), in one piece of scratch.
  const std::int64_t ds_ld = stored_ds_ld(g.s);
  const auto ds_bytes = static_cast<std::size_t>(slices * g.s * ds_ld) * sizeof(std::uint16_t);
  const bool dq_from_ds = choices.dq_from_stored_ds && ds_bytes <= kMaxStoredDsBytes;
  constexpr std::size_t kAlign = 256;
  const std::size_t delta_bytes =
      (static_cast<std::size_t>(slices * g.s) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  const CallScratch memory(scratch, delta_bytes + (dq_from_ds ? ds_bytes : 0), stream);
  auto* delta = static_cast<float*>(memory.data());
  auto* ds = dq_from_ds
                 ? reinterpret_cast<std::uint16_t*>(static_cast<char*>(memory.data()) + delta_bytes)
                 : nullptr;
  // dkdv_kernel<…, kStoreDs, kQueries> with its shared memory.
  const auto launch_dkdv = [&](auto kernel, int bytes) {
    allow_shared(kernel, bytes, "kernels::attention_backward (shared memory)");
    kernel<<<grid, kThreads, bytes, stream>>>(dqkv_h, dctx_h, lse, delta, qkv_h, g, alpha, coeff,
                                              accumulate, ds, ds_ld);
    check_launch("kernels::attention_backward (tensor cores, dk, dv)");
  };
  with_instance(bf16, hn, "attention_backward", [&](auto type, auto head_dim) {
    using T = decltype(type);
    constexpr int kHn = decltype(head_dim)::value;
    constexpr int bytes = kBackwardSharedBytes<kHn>;
    // The shapes under trial (BackwardChoices) at hn = 64.
    constexpr int kShort = 32;
    constexpr int kDqAtoms = kHn == 64 ? 2 : 1;
    const bool short_steps = choices.dkdv_short_steps && kHn == 64;
    const bool dq_atoms = choices.dq_two_atoms && kHn == 64;
    if (dq_from_ds) {
      allow_shared(row_delta_kernel<T, kHn>, kRowDeltaSharedBytes<kHn>,
                   "kernels::attention_backward (shared memory)");
      row_delta_kernel<T, kHn>
          <<<grid, kThreads, kRowDeltaSharedBytes<kHn>, stream>>>(delta, dctx_h, ctx_h, lse, g);
      check_launch("kernels::attention_backward (tensor cores, row deltas)");
      if (short_steps) {
        launch_dkdv(dkdv_kernel<T, kHn, true, kShort>, kDkdvSharedBytes<kHn, kShort>);
      } else {
        launch_dkdv(dkdv_kernel<T, kHn, true>, bytes);
      }
      // dq_from_ds_kernel<…, kAtoms> over blocks of kAtomBlockRows<kAtoms> query rows.
      const auto launch_dq = [&](auto kernel, auto atoms) {
        constexpr int kAtoms = decltype(atoms)::value;
        constexpr int dq_bytes = kDqFromDsSharedBytes<kHn, kAtoms>;
        allow_shared(kernel, dq_bytes, "kernels::attention_backward (shared memory)");
        kernel<<<grid_of(slices, g.s, "attention_backward", kAtomBlockRows<kAtoms>), kThreads,
                 dq_bytes, stream>>>(dqkv_h, ds, ds_ld, qkv_h, g, alpha, coeff, accumulate);
        check_launch("kernels::attention_backward (tensor cores, dq)");
      };
      if (dq_atoms) {
        launch_dq(dq_from_ds_kernel<T, kHn, kDqAtoms>, std::integral_constant<int, kDqAtoms>{});
      } else {
        launch_dq(dq_from_ds_kernel<T, kHn>, std::integral_constant<int, 1>{});
      }
      return;
    }
    allow_shared(dq_kernel<T, kHn>, bytes, "kernels::attention_backward (shared memory)");
    dq_kernel<T, kHn><<<grid, kThreads, bytes, stream>>>(dqkv_h, delta, dctx_h, ctx_h, lse, qkv_h,
                                                         g, alpha, coeff, accumulate);
    check_launch("kernels::attention_backward (tensor cores, dq)");
    if (short_steps) {
      launch_dkdv(dkdv_kernel<T, kHn, false, kShort>, kDkdvSharedBytes<kHn, kShort>);
    } else {
      launch_dkdv(dkdv_kernel<T, kHn, false>, bytes);
    }
  });
}

}  // namespace mds::kernels::attention_tc
