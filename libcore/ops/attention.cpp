#include "ops/attention.h"

#include <algorithm>

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/decode_attention.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

namespace {

// Dimensions from probs [b, np, s, s] and qkv [s, b, np·3·hn], checked against each other; probs
// is fp32 (qkv's dtype is the activation rule's, checked by each op).
cpu::AttentionDims dims_of(const char* op, const Tensor& probs, const Tensor& qkv) {
  if (probs.shape().rank() != 4 || probs.dim(2) != probs.dim(3)) {
    base::fail("ops::", op, ": probs must be [b, np, s, s], got ", probs.shape().to_string());
  }
  const std::int64_t b = probs.dim(0), np = probs.dim(1), s = probs.dim(2);
  if (qkv.shape().rank() != 3 || qkv.dim(0) != s || qkv.dim(1) != b || np == 0 ||
      qkv.dim(2) % (3 * np) != 0) {
    base::fail("ops::", op, ": qkv must be [s, b, np*3*hn] = [", s, ", ", b, ", ", np,
               "*3*hn] to match probs ", probs.shape().to_string(), ", got ",
               qkv.shape().to_string());
  }
  detail::expect_dtype(op, {"probs", probs}, DType::kFloat32);
  return {s, b, np, qkv.dim(2) / (3 * np)};
}

cpu::AttentionDims with_heads(const char* op, cpu::AttentionDims d, HeadRange heads) {
  const std::int64_t total = heads.total > 0 ? heads.total : d.np;
  if (heads.first < 0 || heads.total < 0 || heads.first + d.np > total) {
    base::fail("ops::", op, ": heads [", heads.first, ", ", heads.first + d.np,
               ") are not inside the layer's ", total, " heads");
  }
  d.first_head = heads.first;
  d.stream_heads = total;
  return d;
}

void check_coeff(const char* op, float coeff) {
  if (!(coeff >= 1.0f)) base::fail("ops::", op, ": coeff must be >= 1, got ", coeff);
}

void check_dropout(const char* op, const DropoutStream& stream) {
  if (!(stream.p >= 0.0f && stream.p < 1.0f)) {
    base::fail("ops::", op, ": dropout probability must be in [0, 1), got ", stream.p);
  }
}

void check_float(const char* op, detail::Arg arg, const Shape& shape) {
  detail::expect_dtype(op, arg, DType::kFloat32);
  detail::expect_shape(op, arg, shape);
}

// Dimensions from lse [b, np, s] and qkv [s, b, np·3·hn], checked against each other, with the
// dropout numbering of `heads`; the flash kernels' head dims only.
cpu::AttentionDims flash_dims(const char* op, const Tensor& lse, const Tensor& qkv,
                              HeadRange heads) {
  if (lse.shape().rank() != 3) {
    base::fail("ops::", op, ": lse must be [b, np, s], got ", lse.shape().to_string());
  }
  const std::int64_t b = lse.dim(0), np = lse.dim(1), s = lse.dim(2);
  if (qkv.shape().rank() != 3 || qkv.dim(0) != s || qkv.dim(1) != b || np == 0 ||
      qkv.dim(2) % (3 * np) != 0) {
    base::fail("ops::", op, ": qkv must be [s, b, np*3*hn] = [", s, ", ", b, ", ", np,
               "*3*hn] to match lse ", lse.shape().to_string(), ", got ", qkv.shape().to_string());
  }
  detail::expect_dtype(op, {"lse", lse}, DType::kFloat32);
  const cpu::AttentionDims d = with_heads(op, {s, b, np, qkv.dim(2) / (3 * np)}, heads);
  if (!flash_attention_supports(d.hn)) {
    base::fail("ops::", op, ": head dim ", d.hn,
               " has no flash-attention kernel (8, 16, 32, 64, 96 or 128 with CUDA)");
  }
  return d;
}

// Dimensions from keys [b, np, capacity, hn] and qkv [b, count, np·3·hn], checked against each
// other, against values and the cache's room; the kernels' head dims on a device.
cpu::DecodeAttentionDims decode_dims(const char* op, const Tensor& keys, const Tensor& values,
                                     const Tensor& qkv, std::int64_t past, bool cuda) {
  if (keys.shape().rank() != 4 || keys.dim(1) == 0) {
    base::fail("ops::", op, ": keys must be [b, np, capacity, hn], got ", keys.shape().to_string());
  }
  const std::int64_t b = keys.dim(0), np = keys.dim(1), capacity = keys.dim(2), hn = keys.dim(3);
  if (qkv.shape().rank() != 3 || qkv.dim(0) != b || qkv.dim(2) != np * 3 * hn) {
    base::fail("ops::", op, ": qkv must be [b, count, np*3*hn] = [", b, ", count, ", np * 3 * hn,
               "] to match keys ", keys.shape().to_string(), ", got ", qkv.shape().to_string());
  }
  detail::expect_shape(op, {"values", values}, keys.shape());
  detail::activation_dtype(op, {"qkv", qkv}, {{"keys", keys}, {"values", values}});
  const std::int64_t count = qkv.dim(1);
  if (past < 0 || past + count > capacity) {
    base::fail("ops::", op, ": positions [", past, ", ", past + count, ") do not fit the cache of ",
               capacity);
  }
  if (cuda && !decode_attention_supports_cuda(hn)) {
    base::fail("ops::", op, ": head dim ", hn,
               " has no CUDA decode-attention kernel (8, 16, 32, 64, 96 or 128)");
  }
  return {b, count, np, hn, past, capacity};
}

// The keep bits' words for the kernels: null without dropout or without keep_bits, otherwise
// keep_bits checked (on the context's device, int32, flash_attention_keep_bits_shape).
std::uint32_t* keep_words_of(const char* op, const DeviceContext& ctx, const Tensor& keep_bits,
                             const cpu::AttentionDims& d, const DropoutStream& dropout) {
  if (!detail::given(keep_bits) || dropout.p == 0.0f) return nullptr;
  detail::on_cuda(op, ctx, {{"keep_bits", keep_bits}});
  detail::expect_dtype(op, {"keep_bits", keep_bits}, DType::kInt32);
  detail::expect_shape(op, {"keep_bits", keep_bits},
                       flash_attention_keep_bits_shape(d.b, d.np, d.s));
  return static_cast<std::uint32_t*>(keep_bits.raw());
}

[[noreturn]] void flash_on_host(const char* op) {
  base::fail("ops::", op, " runs on CUDA tensors only (the host path keeps the probabilities: ",
             "attention_probs_forward and attention_context_forward)");
}

}  // namespace

float query_key_layer_scaling_coeff(int layer_number, bool apply_query_key_layer_scaling) {
  return apply_query_key_layer_scaling ? static_cast<float>(std::max(1, layer_number)) : 1.0f;
}

// On the host the activations (qkv, ctx, dctx, dqkv) may be bf16 or fp16: each is widened into an
// fp32 copy (ops/cpu/widened.h), the fp32 function runs, and each output is rounded once; the
// probabilities and their gradients stay fp32.
void attention_probs_forward(Tensor probs, Tensor qkv, float coeff, Tensor key_bias) {
  constexpr const char* kOp = "attention_probs_forward";
  detail::require_cpu(kOp, {{"probs", probs}, {"qkv", qkv}});
  const cpu::AttentionDims d = dims_of(kOp, probs, qkv);
  detail::activation_dtype(kOp, {"qkv", qkv}, {});
  check_coeff(kOp, coeff);
  if (key_bias.raw() != nullptr) {
    detail::require_cpu(kOp, {{"key_bias", key_bias}});
    check_float(kOp, {"key_bias", key_bias}, {d.np, d.s});
  }
  const cpu::Fp32View vqkv(qkv);
  cpu::attention_probs_forward(probs.data<float>(), vqkv.data(), d, coeff,
                               key_bias.raw() != nullptr ? key_bias.data<float>() : nullptr);
}

void attention_context_forward(Tensor ctx, Tensor probs, Tensor qkv) {
  constexpr const char* kOp = "attention_context_forward";
  detail::require_cpu(kOp, {{"ctx", ctx}, {"probs", probs}, {"qkv", qkv}});
  const cpu::AttentionDims d = dims_of(kOp, probs, qkv);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"ctx", ctx}});
  detail::expect_shape(kOp, {"ctx", ctx}, {d.s, d.b, d.np * d.hn});
  const cpu::Fp32View vctx(ctx, false), vqkv(qkv);
  cpu::attention_context_forward(vctx.data(), probs.data<float>(), vqkv.data(), d);
  vctx.store();
}

void attention_context_backward(Tensor dprobs, Tensor dqkv, Tensor dctx, Tensor probs, Tensor qkv) {
  constexpr const char* kOp = "attention_context_backward";
  detail::require_cpu(
      kOp, {{"dprobs", dprobs}, {"dqkv", dqkv}, {"dctx", dctx}, {"probs", probs}, {"qkv", qkv}});
  const cpu::AttentionDims d = dims_of(kOp, probs, qkv);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"dqkv", dqkv}, {"dctx", dctx}});
  check_float(kOp, {"dprobs", dprobs}, probs.shape());
  detail::expect_shape(kOp, {"dqkv", dqkv}, qkv.shape());
  detail::expect_shape(kOp, {"dctx", dctx}, {d.s, d.b, d.np * d.hn});
  const cpu::Fp32View vdqkv(dqkv), vdctx(dctx), vqkv(qkv);
  cpu::attention_context_backward(dprobs.data<float>(), vdqkv.data(), vdctx.data(),
                                  probs.data<float>(), vqkv.data(), d);
  vdqkv.store();
}

void attention_probs_backward(Tensor dqkv, Tensor dprobs, Tensor probs, Tensor qkv, float coeff) {
  constexpr const char* kOp = "attention_probs_backward";
  detail::require_cpu(kOp, {{"dqkv", dqkv}, {"dprobs", dprobs}, {"probs", probs}, {"qkv", qkv}});
  const cpu::AttentionDims d = dims_of(kOp, probs, qkv);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"dqkv", dqkv}});
  check_coeff(kOp, coeff);
  check_float(kOp, {"dprobs", dprobs}, probs.shape());
  detail::expect_shape(kOp, {"dqkv", dqkv}, qkv.shape());
  const cpu::Fp32View vdqkv(dqkv), vqkv(qkv);
  cpu::attention_probs_backward(vdqkv.data(), dprobs.data<float>(), probs.data<float>(),
                                vqkv.data(), d, coeff);
  vdqkv.store();
}

void attention_context_forward_with_dropout(Tensor ctx, Tensor dropped, Tensor probs, Tensor qkv,
                                            const DropoutStream& stream, HeadRange heads) {
  constexpr const char* kOp = "attention_context_forward_with_dropout";
  detail::require_cpu(kOp, {{"ctx", ctx}, {"dropped", dropped}, {"probs", probs}, {"qkv", qkv}});
  const cpu::AttentionDims d = with_heads(kOp, dims_of(kOp, probs, qkv), heads);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"ctx", ctx}});
  detail::expect_shape(kOp, {"ctx", ctx}, {d.s, d.b, d.np * d.hn});
  check_float(kOp, {"dropped", dropped}, probs.shape());
  check_dropout(kOp, stream);
  const cpu::Fp32View vctx(ctx, false), vqkv(qkv);
  cpu::attention_context_forward_with_dropout(vctx.data(), dropped.data<float>(),
                                              probs.data<float>(), vqkv.data(), d, stream);
  vctx.store();
}

void attention_context_backward_with_dropout(Tensor dprobs, Tensor dqkv, Tensor dropped,
                                             Tensor dctx, Tensor probs, Tensor qkv,
                                             const DropoutStream& stream, HeadRange heads) {
  constexpr const char* kOp = "attention_context_backward_with_dropout";
  detail::require_cpu(kOp, {{"dprobs", dprobs},
                            {"dqkv", dqkv},
                            {"dropped", dropped},
                            {"dctx", dctx},
                            {"probs", probs},
                            {"qkv", qkv}});
  const cpu::AttentionDims d = with_heads(kOp, dims_of(kOp, probs, qkv), heads);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"dqkv", dqkv}, {"dctx", dctx}});
  check_float(kOp, {"dprobs", dprobs}, probs.shape());
  check_float(kOp, {"dropped", dropped}, probs.shape());
  detail::expect_shape(kOp, {"dqkv", dqkv}, qkv.shape());
  detail::expect_shape(kOp, {"dctx", dctx}, {d.s, d.b, d.np * d.hn});
  check_dropout(kOp, stream);
  const cpu::Fp32View vdqkv(dqkv), vdctx(dctx), vqkv(qkv);
  cpu::attention_context_backward_with_dropout(dprobs.data<float>(), vdqkv.data(),
                                               dropped.data<float>(), vdctx.data(),
                                               probs.data<float>(), vqkv.data(), d, stream);
  vdqkv.store();
}

void attention_forward(Tensor ctx, Tensor probs, Tensor qkv, float coeff) {
  attention_probs_forward(probs, qkv, coeff);
  attention_context_forward(ctx, probs, qkv);
}

void attention_backward(Tensor dqkv, Tensor dprobs, Tensor dctx, Tensor probs, Tensor qkv,
                        float coeff) {
  attention_context_backward(dprobs, dqkv, dctx, probs, qkv);
  attention_probs_backward(dqkv, dprobs, probs, qkv, coeff);
}

bool flash_attention_supports(std::int64_t hn) {
  if constexpr (detail::kCudaBuilt) return cuda::attention_head_dim_supported(hn);
  return false;
}

Shape flash_attention_keep_bits_shape(std::int64_t b, std::int64_t np, std::int64_t s) {
  return {b, np, s, 2 * ((s + 63) / 64)};
}

// The tensor-core kernels read them; the SIMT kernels draw anyway.
bool flash_attention_reads_keep_bits(DType dtype, std::int64_t hn) {
  if constexpr (detail::kCudaBuilt) return cuda::attention_tensor_core_supported(dtype, hn);
  return false;
}

namespace {

// The flash kernels' ALiBi key bias: null, or fp32 [np, s] on the context's device.
const float* flash_key_bias(const char* op, const DeviceContext& ctx, const Tensor& key_bias,
                            const cpu::AttentionDims& d) {
  if (key_bias.raw() == nullptr) return nullptr;
  detail::on_cuda(op, ctx, {{"key_bias", key_bias}});
  check_float(op, {"key_bias", key_bias}, {d.np, d.s});
  return key_bias.data<float>();
}

}  // namespace

void flash_attention_forward(const DeviceContext& ctx, Tensor context, Tensor lse, Tensor qkv,
                             float coeff, const DropoutStream& dropout, HeadRange heads,
                             Tensor keep_bits, Tensor key_bias) {
  constexpr const char* kOp = "flash_attention_forward";
  if (!detail::on_cuda(kOp, ctx, {{"context", context}, {"lse", lse}, {"qkv", qkv}})) {
    flash_on_host(kOp);
  }
  const cpu::AttentionDims d = flash_dims(kOp, lse, qkv, heads);
  const DType dtype = detail::activation_dtype(kOp, {"qkv", qkv}, {{"context", context}});
  detail::expect_shape(kOp, {"context", context}, {d.s, d.b, d.np * d.hn});
  check_coeff(kOp, coeff);
  check_dropout(kOp, dropout);
  std::uint32_t* keep = keep_words_of(kOp, ctx, keep_bits, d, dropout);
  const float* bias = flash_key_bias(kOp, ctx, key_bias, d);
  if constexpr (detail::kCudaBuilt) {
    cuda::attention_forward(ctx, context.raw(), lse.data<float>(), qkv.raw(), dtype, d, coeff,
                            dropout, keep, bias);
  }
}

void flash_attention_backward(const DeviceContext& ctx, Tensor dqkv, Tensor dcontext,
                              Tensor context, Tensor lse, Tensor qkv, float coeff,
                              const DropoutStream& dropout, HeadRange heads, Dx dx_mode,
                              Tensor keep_bits, Tensor key_bias) {
  constexpr const char* kOp = "flash_attention_backward";
  if (!detail::on_cuda(kOp, ctx,
                       {{"dqkv", dqkv},
                        {"dcontext", dcontext},
                        {"context", context},
                        {"lse", lse},
                        {"qkv", qkv}})) {
    flash_on_host(kOp);
  }
  const cpu::AttentionDims d = flash_dims(kOp, lse, qkv, heads);
  const DType dtype = detail::activation_dtype(
      kOp, {"qkv", qkv}, {{"dqkv", dqkv}, {"dcontext", dcontext}, {"context", context}});
  detail::expect_shape(kOp, {"dqkv", dqkv}, qkv.shape());
  detail::expect_shape(kOp, {"dcontext", dcontext}, {d.s, d.b, d.np * d.hn});
  detail::expect_shape(kOp, {"context", context}, {d.s, d.b, d.np * d.hn});
  check_coeff(kOp, coeff);
  check_dropout(kOp, dropout);
  if (dqkv.raw() == qkv.raw() || dqkv.raw() == dcontext.raw() || dqkv.raw() == context.raw()) {
    base::fail("ops::", kOp, ": dqkv must not alias the inputs");
  }
  const std::uint32_t* keep = keep_words_of(kOp, ctx, keep_bits, d, dropout);
  const float* bias = flash_key_bias(kOp, ctx, key_bias, d);
  if constexpr (detail::kCudaBuilt) {
    cuda::attention_backward(ctx, dqkv.raw(), dcontext.raw(), context.raw(), lse.data<float>(),
                             qkv.raw(), dtype, d, coeff, dropout, dx_mode == Dx::kAccumulate, keep,
                             bias);
  }
}

// The decode attention's cache and activations share one dtype; on the host a 16-bit call widens
// them (the whole cache, a copy per call) and rounds what it writes once, on a device the kernels
// widen their loads.
void kv_cache_append(const DeviceContext& ctx, Tensor keys, Tensor values, Tensor qkv,
                     std::int64_t past) {
  constexpr const char* kOp = "kv_cache_append";
  const bool cuda = detail::on_cuda(kOp, ctx, {{"keys", keys}, {"values", values}, {"qkv", qkv}});
  const cpu::DecodeAttentionDims d = decode_dims(kOp, keys, values, qkv, past, cuda);
  if (cuda) {
    if constexpr (detail::kCudaBuilt) {
      cuda::kv_cache_append(ctx, keys.raw(), values.raw(), qkv.raw(), qkv.dtype(), d);
    }
    return;
  }
  const cpu::Fp32View vkeys(keys), vvalues(values), vqkv(qkv);
  cpu::kv_cache_append(vkeys.data(), vvalues.data(), vqkv.data(), d);
  vkeys.store();
  vvalues.store();
}

void decode_attention_forward(const DeviceContext& ctx, Tensor context, Tensor qkv, Tensor keys,
                              Tensor values, std::int64_t past, float coeff, Tensor key_bias) {
  constexpr const char* kOp = "decode_attention_forward";
  const bool cuda = detail::on_cuda(
      kOp, ctx, {{"context", context}, {"qkv", qkv}, {"keys", keys}, {"values", values}});
  const cpu::DecodeAttentionDims d = decode_dims(kOp, keys, values, qkv, past, cuda);
  detail::activation_dtype(kOp, {"qkv", qkv}, {{"context", context}});
  detail::expect_shape(kOp, {"context", context}, {d.b, d.count, d.np * d.hn});
  check_coeff(kOp, coeff);
  const bool biased = key_bias.raw() != nullptr;
  if (biased) {
    detail::on_cuda(kOp, ctx, {{"key_bias", key_bias}, {"qkv", qkv}});
    detail::expect_dtype(kOp, {"key_bias", key_bias}, DType::kFloat32);
    if (key_bias.shape().rank() != 2 || key_bias.shape()[0] != d.np ||
        key_bias.shape()[1] < d.past + d.count) {
      base::fail(kOp, ": key_bias must be [", d.np, ", >= ", d.past + d.count, "], got ",
                 key_bias.shape().to_string());
    }
  }
  if (cuda) {
    if constexpr (detail::kCudaBuilt) {
      cuda::decode_attention_forward(
          ctx, context.raw(), qkv.raw(), keys.raw(), values.raw(), qkv.dtype(), d, coeff,
          biased ? key_bias.data<float>() : nullptr, biased ? key_bias.shape()[1] : 0);
    }
    return;
  }
  const cpu::Fp32View vcontext(context, false), vqkv(qkv), vkeys(keys), vvalues(values);
  cpu::decode_attention_forward(vcontext.data(), vqkv.data(), vkeys.data(), vvalues.data(), d,
                                coeff, biased ? key_bias.data<float>() : nullptr,
                                biased ? key_bias.shape()[1] : 0);
  vcontext.store();
}

bool decode_attention_supports_cuda(std::int64_t hn) {
  if constexpr (detail::kCudaBuilt) return cuda::decode_attention_head_dim_supported(hn);
  return false;
}

}  // namespace mds::ops
