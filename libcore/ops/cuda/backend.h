// The CUDA backend of the public ops (ops/*.h): one thin function per kernels/ entry point, with
// the kernels' arguments (device pointers, sizes) and the DeviceContext in place of a
// cudaStream_t, so that ops/*.cpp call it without CUDA headers. Defined in ops/cuda/*.cpp, which
// are compiled only with BUILD_CUDA; the public ops check devices, dtypes and shapes first.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/adam.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/decode_attention.h"
#include "ops/device_context.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/gelu.h"
#include "ops/gradients.h"
#include "tensor/dtype.h"

namespace mds::ops::cuda {

// The context's stream, cuBLASLt handle and staging area (ops/cuda/resources.cpp).
Resources* create_resources(int device_index, bool tf32);
void destroy_resources(Resources* resources) noexcept;
void synchronize(const DeviceContext& ctx);
// DeviceContext::tune_gemms.
void tune_gemms(Resources& resources, const std::string& path);
// DeviceContext::time_kernel_shapes and kernel_shape_picks.
void time_kernel_shapes(Resources& resources);
std::vector<std::string> kernel_shape_picks(const Resources& resources);

// Activation pointers are void* with their `dtype` (fp32, bf16 or fp16: 16-bit loads widened,
// fp32 math, outputs rounded once); parameter gradients and statistics are fp32; the parameters of
// LayerNorm, bias-GeLU, bias-dropout-add and the embedding are void* with their `param_dtype`
// (fp32 or `dtype`, widened on load).

// kernels/elementwise.h
void add(const DeviceContext& ctx, void* out, const void* a, const void* b, tensor::DType dtype,
         std::int64_t n);
void scale(const DeviceContext& ctx, void* out, const void* x, float factor, tensor::DType dtype,
           std::int64_t n);
void fill(const DeviceContext& ctx, void* out, tensor::DType dtype, float value, std::int64_t n);
void cast(const DeviceContext& ctx, void* out, tensor::DType out_dtype, const void* x,
          tensor::DType x_dtype, std::int64_t n);
void cast_pieces(const DeviceContext& ctx, void* out, tensor::DType out_dtype, const void* x,
                 tensor::DType x_dtype, std::span<const CastPiece> pieces, float factor);

// kernels/gradients.h (the last two wait for their results)
void accumulate_rounded(const DeviceContext& ctx, void* accumulator,
                        tensor::DType accumulator_dtype, const float* micro, std::int64_t n,
                        tensor::DType grad_dtype, bool fresh, tensor::DType round_through);
void round_through(const DeviceContext& ctx, void* x, tensor::DType x_dtype, std::int64_t n,
                   tensor::DType dtype);
void scale_in_dtype(const DeviceContext& ctx, void* x, tensor::DType x_dtype, std::int64_t n,
                    float operand, bool divide);
bool has_inf_or_nan(const DeviceContext& ctx, const void* x, tensor::DType dtype, std::int64_t n);
void sums_of_squares(const DeviceContext& ctx, double* out, const void* x, tensor::DType dtype,
                     const SquaresSegment* segments, std::int64_t count);

// kernels/gelu.h
void gelu_forward(const DeviceContext& ctx, void* out, const void* x, tensor::DType dtype,
                  std::int64_t n, GeluKind kind);
void gelu_backward(const DeviceContext& ctx, void* dx, const void* dout, const void* x,
                   tensor::DType dtype, std::int64_t n, GeluKind kind);
void bias_gelu_forward(const DeviceContext& ctx, void* out, const void* x, const void* bias,
                       tensor::DType dtype, tensor::DType bias_dtype, std::int64_t rows,
                       std::int64_t cols, GeluKind kind);
void bias_gelu_backward(const DeviceContext& ctx, void* dx, float* dbias, const void* dout,
                        const void* x, const void* bias, tensor::DType dtype,
                        tensor::DType bias_dtype, std::int64_t rows, std::int64_t cols,
                        GeluKind kind, bool accumulate);

// kernels/layernorm.h
void layernorm_forward(const DeviceContext& ctx, void* out, float* mean, float* rstd, const void* x,
                       const void* weight, const void* bias, tensor::DType dtype,
                       tensor::DType param_dtype, std::int64_t rows, std::int64_t cols, float eps);
void layernorm_backward(const DeviceContext& ctx, void* dx, float* dweight, float* dbias,
                        const void* dout, const void* x, const void* weight, const float* mean,
                        const float* rstd, tensor::DType dtype, tensor::DType param_dtype,
                        std::int64_t rows, std::int64_t cols);

// kernels/gemm.h: x, weight, bias, out, dout, dx, a, b of `dtype` (fp32 with full fp32 math, or
// bf16/fp16 with fp32 accumulation); dweight and dbias fp32.
void linear_forward(const DeviceContext& ctx, void* out, const void* x, const void* weight,
                    const void* bias, tensor::DType dtype, std::int64_t m, std::int64_t n,
                    std::int64_t k);
void linear_backward(const DeviceContext& ctx, void* dx, float* dweight, float* dbias,
                     const void* dout, const void* x, const void* weight, tensor::DType dtype,
                     std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate_dx,
                     bool accumulate_dweight);
void batched_matmul(const DeviceContext& ctx, void* out, const void* a, const void* b,
                    tensor::DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n,
                    std::int64_t k, bool transpose_a, bool transpose_b, float alpha, float beta);

// kernels/gemm_gelu.h: 16-bit x, weight, bias, out, pre_activation.
void linear_bias_gelu_forward(const DeviceContext& ctx, void* out, void* pre_activation,
                              const void* x, const void* weight, const void* bias,
                              tensor::DType dtype, std::int64_t m, std::int64_t n, std::int64_t k);

// kernels/dropout.h
void dropout_forward(const DeviceContext& ctx, void* out, const void* x, const void* bias,
                     const void* residual, tensor::DType dtype, tensor::DType bias_dtype,
                     std::int64_t n, std::int64_t cols, const DropoutStream& stream);
void dropout_backward(const DeviceContext& ctx, void* dx, const void* dout, tensor::DType dtype,
                      std::int64_t n, const DropoutStream& stream, bool accumulate);
void dropout_bias_grad(const DeviceContext& ctx, float* dbias, const void* dout,
                       tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                       const DropoutStream& stream);
// False, having done nothing, where the one-pass kernel does not apply.
bool bias_dropout_add_backward(const DeviceContext& ctx, void* dx, float* dbias, void* dresidual,
                               const void* dout, tensor::DType dtype, std::int64_t rows,
                               std::int64_t cols, const DropoutStream& stream, bool accumulate);

// kernels/embedding.h (the backward's sort workspace is the context's scratch)
void embedding_lookup(const DeviceContext& ctx, void* out, const std::int64_t* ids,
                      const void* table, tensor::DType dtype, tensor::DType table_dtype,
                      std::int64_t n, std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                      bool add);
void embedding_forward(const DeviceContext& ctx, void* out, const std::int64_t* tokens,
                       const void* wte, const std::int64_t* positions, const void* wpe,
                       tensor::DType dtype, tensor::DType table_dtype, std::int64_t n,
                       std::int64_t h);
void embedding_backward(const DeviceContext& ctx, float* dtable, const void* dout,
                        tensor::DType dtype, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start);

// kernels/cross_entropy.h: logits and dlogits of `dtype` (fp32, bf16 or fp16), per-token values
// fp32; fp32 logits hold the exps after exp_sum/forward, 16-bit ones are left unchanged and the
// backward recomputes the exps from them and max.
void cross_entropy_row_max(const DeviceContext& ctx, float* max, const void* logits,
                           tensor::DType dtype, std::int64_t n, std::int64_t v);
void cross_entropy_target_logit(const DeviceContext& ctx, float* target_logit, const void* logits,
                                tensor::DType dtype, const std::int64_t* targets, const float* max,
                                std::int64_t n, std::int64_t v, std::int64_t vocab_start);
void cross_entropy_exp_sum(const DeviceContext& ctx, float* sum_exp, void* logits,
                           tensor::DType dtype, const float* max, std::int64_t n, std::int64_t v);
void cross_entropy_loss(const DeviceContext& ctx, float* loss, const float* sum_exp,
                        const float* target_logit, std::int64_t n);
void cross_entropy_forward(const DeviceContext& ctx, float* loss, float* max, float* sum_exp,
                           void* logits, tensor::DType dtype, const std::int64_t* targets,
                           std::int64_t n, std::int64_t v);
void cross_entropy_backward(const DeviceContext& ctx, void* dlogits, const void* logits,
                            tensor::DType dtype, const std::int64_t* targets, const float* max,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start);
void cross_entropy_forward_backward(const DeviceContext& ctx, float* loss, void* dlogits,
                                    const void* logits, tensor::DType dtype,
                                    const std::int64_t* targets, const float* dloss, std::int64_t n,
                                    std::int64_t v);
// The micro-batch mean of ops/cross_entropy.h: the per-token values come to the host (a sync),
// where ops/cpu sums them in the same order as for host tensors.
float masked_mean_loss(const DeviceContext& ctx, const float* loss, const float* mask,
                       std::int64_t n);
// Σ mask of a device mask, summed on the host as the CPU's (a sync).
double loss_mask_sum(const DeviceContext& ctx, const float* mask, std::int64_t n);
// dloss = mask · (grad / mask_sum), the quotient as the CPU rounds it, the product on the device:
// no wait.
void masked_mean_loss_backward(const DeviceContext& ctx, float* dloss, const float* mask,
                               std::int64_t n, float grad, double mask_sum);

// kernels/attention.h
bool attention_head_dim_supported(std::int64_t hn);
bool attention_tensor_core_supported(tensor::DType dtype, std::int64_t hn);
void attention_forward(const DeviceContext& ctx, void* context, float* lse, const void* qkv,
                       tensor::DType dtype, cpu::AttentionDims d, float coeff,
                       const DropoutStream& dropout, std::uint32_t* keep_bits,
                       const float* key_bias);
void attention_backward(const DeviceContext& ctx, void* dqkv, const void* dcontext,
                        const void* context, const float* lse, const void* qkv, tensor::DType dtype,
                        cpu::AttentionDims d, float coeff, const DropoutStream& dropout,
                        bool accumulate, const std::uint32_t* keep_bits, const float* key_bias);

// kernels/decode_attention.h
bool decode_attention_head_dim_supported(std::int64_t hn);
void kv_cache_append(const DeviceContext& ctx, void* keys, void* values, const void* qkv,
                     tensor::DType dtype, cpu::DecodeAttentionDims d);
void decode_attention_forward(const DeviceContext& ctx, void* context, const void* qkv,
                              const void* keys, const void* values, tensor::DType dtype,
                              cpu::DecodeAttentionDims d, float coeff, const float* key_bias,
                              std::int64_t key_bias_ld);

// kernels/adam.h
void adamw_step(const DeviceContext& ctx, float* params, const float* grads, float* exp_avg,
                float* exp_avg_sq, std::int64_t n, const AdamWConfig& config,
                float bias_correction1, float bias_correction2);
void adamw_step_and_cast(const DeviceContext& ctx, float* params, const float* grads,
                         float* exp_avg, float* exp_avg_sq, std::int64_t n,
                         const AdamWConfig& config, float bias_correction1, float bias_correction2,
                         void* low, tensor::DType low_dtype);
// Σ x² in double, brought to the host (waits for the stream).
double sum_of_squares(const DeviceContext& ctx, const float* x, std::int64_t n);

}  // namespace mds::ops::cuda
