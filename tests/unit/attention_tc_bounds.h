// Elementwise error bounds of the tensor-core flash attention (kernels/attention_tc_kernels.cuh)
// against the host's 16-bit attention (the fp32 ops on the widened inputs, each output rounded
// once), derived a priori from the inputs and the host's probabilities (docs/cuda.md,
// "Tensor-core attention", gives the argument). With u the unit roundoff of the 16-bit type
// (2^-8 bf16, 2^-11 fp16), W = p·f the dropped probabilities (f the dropout factor), dP = dO·v,
// delta = Σ_j W·dP, dS = coeff·p·(dP·f − delta):
//   ctx_i  ≤ u·Σ_j W_ij·|v_j|            P rounded to 16 bits before P·V
//   dv_j   ≤ u·Σ_i W_ij·|dO_i|           the same P in pᵀ·dO
//   dq_i   ≤ α·Σ_j |k_j|·G_ij, dk_j ≤ α·Σ_i |q_i|·G_ij, with
//   G_ij   = coeff·p_ij·Δ_i + u·|dS_ij|  dS rounded to 16 bits; Δ_i bounds the error of delta,
//                                         which the kernels take from the stored 16-bit ctx:
//   Δ_i    = Σ_d |dO_id|·(u·Σ_j W_ij·|v_jd| + u·|ctx_id|)
// each plus 2u·|reference| (the kernel's and the host's final roundings), plus the fp32 terms:
// sums of at most s + hn terms (ε_sum = (s + hn)·2^-24 of the sums of magnitudes) and the
// relative error of a recomputed p (ε_p = 2·hn·2^-24·max|z|_abs + 8·2^-24, from the score's dot
// product and lse, expf's ulps; with ALiBi |z|_abs includes the key's |bias|, added in fp32 to
// scores and taken off with lse), and for fp16 the absolute rounding of a subnormal P or dS
// (2^-25 per term). The SIMT kernels stay within the same bounds (they round neither P nor dS).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tensor/dtype.h"

namespace mds::attention_tc_test {

// Everything widened to double; layouts of ops/attention.h (qkv [s, b, np·3·hn], ctx
// [s, b, np·hn], probs [b, np, s, s]).
struct BoundInputs {
  std::int64_t s, b, np, hn;
  double coeff;
  double u;                                           // unit roundoff of the 16-bit type
  bool subnormals;                                    // fp16: P and dS may round as subnormals
  std::vector<double> qkv = {}, dctx = {}, ctx = {};  // ctx: the host's (rounded) context
  std::vector<double> probs = {}, dropped = {};       // dropped = probs without dropout
  std::vector<double> key_bias = {};                  // ALiBi: [np, s], or empty
};

// The computations' errors, before the final roundings (the comparison adds 2u·|reference|).
struct Bounds {
  std::vector<double> ctx, dqkv;
};

inline Bounds attention_bounds(const BoundInputs& in) {
  const std::int64_t s = in.s, hn = in.hn, slices = in.b * in.np;
  const std::int64_t qkv_ld = slices * 3 * hn, ctx_ld = slices * hn;
  const double alpha = 1.0 / (std::sqrt(static_cast<double>(hn)) * in.coeff), u = in.u;
  const double sub = in.subnormals ? 0x1p-25 : 0.0;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  Bounds out{std::vector<double>(in.ctx.size()), std::vector<double>(in.qkv.size())};
  for (std::int64_t bh = 0; bh < slices; ++bh) {
    const auto q = [&](std::int64_t i, std::int64_t d) {
      return in.qkv[at(i * qkv_ld + bh * 3 * hn + d)];
    };
    const auto k = [&](std::int64_t j, std::int64_t d) { return q(j, hn + d); };
    const auto v = [&](std::int64_t j, std::int64_t d) { return q(j, 2 * hn + d); };
    const auto dO = [&](std::int64_t i, std::int64_t d) {
      return in.dctx[at(i * ctx_ld + bh * hn + d)];
    };
    const auto P = [&](std::int64_t i, std::int64_t j) {
      return in.probs[at((bh * s + i) * s + j)];
    };
    const auto W = [&](std::int64_t i, std::int64_t j) {
      return in.dropped[at((bh * s + i) * s + j)];
    };
    double z_abs = 0.0;
    for (std::int64_t i = 0; i < s; ++i) {
      for (std::int64_t j = 0; j <= i; ++j) {
        double sum = 0.0;
        for (std::int64_t d = 0; d < hn; ++d) sum += std::fabs(q(i, d) * k(j, d));
        const double bias =
            in.key_bias.empty() ? 0.0 : std::fabs(in.key_bias[at((bh % in.np) * s + j)]);
        z_abs = std::max(z_abs, bias + alpha * in.coeff * sum);
      }
    }
    const double eps = static_cast<double>(s + hn) * 0x1p-24 +
                       2.0 * static_cast<double>(hn) * 0x1p-24 * z_abs + 8.0 * 0x1p-24;
    const double ru = u + eps;  // a rounding to 16 bits plus the fp32 terms, relative

    // dP, delta, dS and the per-row delta error.
    std::vector<double> dP(at(s * s)), dS(at(s * s)), dp_abs(at(s * s)), delta_err(at(s));
    for (std::int64_t i = 0; i < s; ++i) {
      double delta = 0.0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0.0, mag = 0.0;
        for (std::int64_t d = 0; d < hn; ++d) {
          dot += dO(i, d) * v(j, d);
          mag += std::fabs(dO(i, d) * v(j, d));
        }
        dP[at(i * s + j)] = dot;
        dp_abs[at(i * s + j)] = mag;
        delta += W(i, j) * dot;
      }
      double err = 0.0;
      for (std::int64_t d = 0; d < hn; ++d) {
        double weighted = 0.0, plain = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          weighted += W(i, j) * std::fabs(v(j, d));
          plain += std::fabs(v(j, d));
        }
        const double c = in.ctx[at(i * ctx_ld + bh * hn + d)];
        const double ctx_err = ru * weighted + sub * plain;
        // The stored ctx: computed, then rounded (the kernel's own dot with dO adds ε).
        err += std::fabs(dO(i, d)) * (ctx_err + (u * (1.0 + u) + eps) * std::fabs(c));
        out.ctx[at(i * ctx_ld + bh * hn + d)] = ctx_err;
      }
      delta_err[at(i)] = err;
      for (std::int64_t j = 0; j <= i; ++j) {
        const double p = P(i, j), f = p > 0.0 ? W(i, j) / p : 0.0;
        dS[at(i * s + j)] = in.coeff * p * (dP[at(i * s + j)] * f - delta);
      }
    }
    // G_ij, then dq, dk, dv.
    const auto G = [&](std::int64_t i, std::int64_t j) {
      const double p = P(i, j), f = p > 0.0 ? W(i, j) / p : 0.0;
      return in.coeff * p * (delta_err[at(i)] + eps * f * dp_abs[at(i * s + j)]) +
             ru * std::fabs(dS[at(i * s + j)]) + sub;
    };
    for (std::int64_t i = 0; i < s; ++i) {
      for (std::int64_t d = 0; d < hn; ++d) {
        double dq = 0.0, dk = 0.0, dv = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) dq += std::fabs(k(j, d)) * G(i, j);
        for (std::int64_t r = i; r < s; ++r) {  // i as a key: the rows r ≥ i that see it
          dk += std::fabs(q(r, d)) * G(r, i);
          dv += ru * W(r, i) * std::fabs(dO(r, d)) + sub * std::fabs(dO(r, d));
        }
        out.dqkv[at(i * qkv_ld + bh * 3 * hn + d)] = alpha * dq;
        out.dqkv[at(i * qkv_ld + bh * 3 * hn + hn + d)] = alpha * dk;
        out.dqkv[at(i * qkv_ld + bh * 3 * hn + 2 * hn + d)] = dv;
      }
    }
  }
  return out;
}

// BoundInputs from 16-bit host tensors (T: tensor::BFloat16 or tensor::Float16) and the host's
// fp32 probabilities (dropped = probs without dropout), with ALiBi's key bias [np, s] if any.
template <typename T>
BoundInputs bound_inputs(std::int64_t s, std::int64_t b, std::int64_t np, std::int64_t hn,
                         double coeff, const std::vector<T>& qkv, const std::vector<T>& dctx,
                         const std::vector<T>& host_ctx, const std::vector<float>& probs,
                         const std::vector<float>& dropped,
                         const std::vector<float>& key_bias = {}) {
  constexpr bool kFp16 = std::is_same_v<T, tensor::Float16>;
  BoundInputs in{s, b, np, hn, coeff, kFp16 ? 0x1p-11 : 0x1p-8, kFp16};
  for (const T x : qkv) in.qkv.push_back(tensor::to_float(x));
  for (const T x : dctx) in.dctx.push_back(tensor::to_float(x));
  for (const T x : host_ctx) in.ctx.push_back(tensor::to_float(x));
  in.probs.assign(probs.begin(), probs.end());
  in.dropped.assign(dropped.begin(), dropped.end());
  in.key_bias.assign(key_bias.begin(), key_bias.end());
  return in;
}

// got against want (16-bit) over the elements first + k·stride + [0, width): how many are not
// finite or beyond bound + 2u·|want| (the kernel's and the host's final roundings), the largest
// error as a share of that limit, and the normwise relative error.
struct Measured {
  std::size_t beyond = 0;
  double worst_share = 0.0, relative = 0.0;
};

template <typename T>
Measured measure(const std::vector<T>& got, const std::vector<T>& want,
                 const std::vector<double>& bound, std::size_t first, std::size_t width,
                 std::size_t stride) {
  const double u = std::is_same_v<T, tensor::Float16> ? 0x1p-11 : 0x1p-8;
  Measured m;
  double diff = 0.0, norm = 0.0;
  for (std::size_t base = first; base < got.size(); base += stride) {
    for (std::size_t i = base; i < base + width; ++i) {
      const double g = tensor::to_float(got[i]), w = tensor::to_float(want[i]);
      if (!std::isfinite(g)) {
        ++m.beyond;
        continue;
      }
      const double err = std::fabs(g - w), limit = bound[i] + 2.0 * u * (1.0 + u) * std::fabs(w);
      if (err > limit) ++m.beyond;
      if (limit > 0.0) m.worst_share = std::max(m.worst_share, err / limit);
      diff += err * err;
      norm += w * w;
    }
  }
  m.relative = norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  return m;
}

}  // namespace mds::attention_tc_test
