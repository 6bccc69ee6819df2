#include "ops/cpu/cross_entropy.h"

#include <array>
#include <cmath>
#include <vector>

#include "ops/cpu/vector_math.h"
#include "tensor/round_to.h"

namespace mds::ops::cpu {

namespace {

// `x > m ? x : m` skips NaNs as fmax does, and unlike the fmax call it vectorizes; max is exact in
// any order, so independent lanes give fmax's value (at most the sign of a zero max can differ,
// which no result below depends on: x − (±0) rounds the same for x ≠ ±0).
MDS_VECTOR_CLONES float row_max(const float* row, std::int64_t v) {
  constexpr std::int64_t kLanes = 16;
  std::array<float, kLanes> lanes;
  lanes.fill(-INFINITY);
  std::int64_t j = 0;
  for (; j + kLanes <= v; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const float x = row[j + l];
      float& m = lanes[static_cast<std::size_t>(l)];
      m = x > m ? x : m;
    }
  }
  float m = -INFINITY;
  for (const float lane : lanes) m = lane > m ? lane : m;
  for (; j < v; ++j) m = row[j] > m ? row[j] : m;
  return m;
}

// row[j] ← exp(row[j] − max); returns their sum, taken in sixteen running sums added up in a fixed
// order: vectorizable and thread-independent.
MDS_VECTOR_CLONES float exp_and_sum_row(float* row, float max, std::int64_t v) {
  constexpr std::int64_t kLanes = 16;
  std::array<float, kLanes> lanes{};
  std::int64_t j = 0;
  for (; j + kLanes <= v; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const float e = vector_exp(row[j + l] - max);
      row[j + l] = e;
      lanes[static_cast<std::size_t>(l)] += e;
    }
  }
  float sum = 0.0f;
  for (; j < v; ++j) {
    row[j] = vector_exp(row[j] - max);
    sum += row[j];
  }
  for (const float lane : lanes) sum += lane;
  return sum;
}

// grad[j] = (exps[j] / sum_exp − [j == local]) · dloss, as inv = 1 / sum_exp and scale = dloss:
// each element rounded as softmax − onehot, then × dloss; the target's column is redone after the
// branch-free loop, from its value read before (grad may be exps).
inline void softmax_grad_row(float* grad, const float* exps, std::int64_t local, float inv,
                             float scale, std::int64_t v) {
  const bool owns_target = local >= 0 && local < v;
  const float target_exp = owns_target ? exps[local] : 0.0f;
  for (std::int64_t j = 0; j < v; ++j) grad[j] = exps[j] * inv * scale;
  if (owns_target) grad[local] = (target_exp * inv - 1.0f) * scale;
}

// Calls body(element) with a value of the 16-bit element type of `dtype` (bf16 or fp16).
template <typename Body>
void with_16bit_type(tensor::DType dtype, Body&& body) {
  if (dtype == tensor::DType::kBFloat16) {
    body(tensor::BFloat16{});
  } else {
    body(tensor::Float16{});
  }
}

// Calls row_fn(i, row) for every row i of 16-bit logits [n, v], `row` holding its values widened
// exactly in a buffer of the calling thread: what the fp32 functions would read from fp32 logits,
// one row at a time instead of an [n, v] copy.
template <typename T, typename RowFn>
void for_each_widened_row(const T* logits, std::int64_t n, std::int64_t v, RowFn&& row_fn) {
#pragma omp parallel
  {
    std::vector<float> row(static_cast<std::size_t>(v));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const T* in = logits + i * v;
      for (std::int64_t j = 0; j < v; ++j)
        row[static_cast<std::size_t>(j)] = tensor::to_float(in[j]);
      row_fn(i, row.data());
    }
  }
}

}  // namespace

void cross_entropy_row_max(float* max, const float* logits, std::int64_t n, std::int64_t v) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) max[i] = row_max(logits + i * v, v);
}

void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t local = targets[i] - vocab_start;
    // Upstream subtracts the max from the whole row first, so the gathered value is z − max.
    target_logit[i] = local >= 0 && local < v ? logits[i * v + local] - max[i] : 0.0f;
  }
}

void cross_entropy_exp_sum(float* sum_exp, float* logits, const float* max, std::int64_t n,
                           std::int64_t v) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum_exp[i] = exp_and_sum_row(logits + i * v, max[i], v);
}

void cross_entropy_loss(float* loss, const float* sum_exp, const float* target_logit,
                        std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) loss[i] = std::log(sum_exp[i]) - target_logit[i];
}

void cross_entropy_backward(float* dlogits, const float* exp_logits, const std::int64_t* targets,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    softmax_grad_row(dlogits + i * v, exp_logits + i * v, targets[i] - vocab_start,
                     1.0f / sum_exp[i], dloss[i], v);
  }
}

float masked_mean_loss(const float* loss, const float* mask, std::int64_t n) {
  double weighted = 0.0, count = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    weighted += static_cast<double>(loss[i] * mask[i]);
    count += mask[i];
  }
  return static_cast<float>(weighted / count);
}

double loss_mask_sum(const float* mask, std::int64_t n) {
  double count = 0.0;
  for (std::int64_t i = 0; i < n; ++i) count += mask[i];
  return count;
}

void masked_mean_loss_backward(float* dloss, const float* mask, std::int64_t n, float grad,
                               double mask_sum) {
  const float scale = static_cast<float>(grad / mask_sum);
  for (std::int64_t i = 0; i < n; ++i) dloss[i] = scale * mask[i];
}

void cross_entropy_row_max(float* max, const void* logits, tensor::DType dtype, std::int64_t n,
                           std::int64_t v) {
  with_16bit_type(dtype, [&](auto element) {
    using T = decltype(element);
    for_each_widened_row(static_cast<const T*>(logits), n, v,
                         [&](std::int64_t i, const float* row) { max[i] = row_max(row, v); });
  });
}

void cross_entropy_target_logit(float* target_logit, const void* logits, tensor::DType dtype,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start) {
  with_16bit_type(dtype, [&](auto element) {
    using T = decltype(element);
    const T* l = static_cast<const T*>(logits);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t local = targets[i] - vocab_start;
      target_logit[i] =
          local >= 0 && local < v ? tensor::to_float(l[i * v + local]) - max[i] : 0.0f;
    }
  });
}

void cross_entropy_exp_sum(float* sum_exp, const void* logits, tensor::DType dtype,
                           const float* max, std::int64_t n, std::int64_t v) {
  with_16bit_type(dtype, [&](auto element) {
    using T = decltype(element);
    // The exps land in the thread's row and are dropped: the backward recomputes them.
    for_each_widened_row(static_cast<const T*>(logits), n, v, [&](std::int64_t i, float* row) {
      sum_exp[i] = exp_and_sum_row(row, max[i], v);
    });
  });
}

void cross_entropy_backward(void* dlogits, const void* logits, tensor::DType dtype,
                            const std::int64_t* targets, const float* max, const float* sum_exp,
                            const float* dloss, std::int64_t n, std::int64_t v,
                            std::int64_t vocab_start) {
  with_16bit_type(dtype, [&](auto element) {
    using T = decltype(element);
    T* out = static_cast<T*>(dlogits);
    // The whole row is widened before any of it is written, so dlogits may be logits.
    for_each_widened_row(static_cast<const T*>(logits), n, v, [&](std::int64_t i, float* row) {
      exp_and_sum_row(row, max[i], v);  // the exps the fp32 forward would have left, bit for bit
      softmax_grad_row(row, row, targets[i] - vocab_start, 1.0f / sum_exp[i], dloss[i], v);
      T* grad = out + i * v;
      for (std::int64_t j = 0; j < v; ++j) grad[j] = tensor::round_to<T>(row[j]);
    });
  });
}

}  // namespace mds::ops::cpu
