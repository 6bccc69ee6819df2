#include "train/grad_clip.h"

#include <cmath>
#include <vector>

#include "base/error.h"
#include "ops/elementwise.h"
#include "ops/gradients.h"

namespace mds::train {
namespace {

// The one-element FloatTensor upstream keeps the sum in (all-reduced over the model-parallel
// group), then `.item() ** (1. / 2)` (C pow).
double root_through_fp32(double sum_of_squares, dist::Communicator* model_parallel) {
  float sum = static_cast<float>(sum_of_squares);
  if (model_parallel != nullptr && model_parallel->size() > 1) {
    model_parallel->all_reduce(tensor::Tensor(&sum, tensor::DType::kFloat32, tensor::Shape{1}),
                               dist::ReduceOp::kSum);
  }
  return std::pow(static_cast<double>(sum), 0.5);
}

double finite_or_minus_one(double norm) {
  return std::isfinite(norm) ? norm : -1.0;
}

// The last stage's tied replica never counts: its gradient equals the first stage's after
// ReduceTiedGrads. Upstream's fp32 engine path and FP16_Optimizer count it (a second time);
// docs/parallelism.md says why mds does not.
bool counts(const model::ParamTable& table, const model::ParamSpec& param) {
  return !param.tied_replica && table.counts_in_norm(param);
}

// Each parameter's Σ g² (0 for those that do not count), all from one ops::sums_of_squares call:
// on a device one copy back instead of a wait per parameter.
std::vector<double> param_sums_of_squares(const ops::DeviceContext& ctx,
                                          const model::ParamTable& table, tensor::Tensor grads) {
  std::vector<ops::SquaresSegment> segments;
  std::vector<std::size_t> counted;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& param = table[i];
    if (!counts(table, param)) continue;
    segments.push_back({param.offset, param.local_numel()});
    counted.push_back(i);
  }
  const std::vector<double> sums = ops::sums_of_squares(ctx, grads, segments);
  std::vector<double> per_param(table.size(), 0.0);
  for (std::size_t k = 0; k < counted.size(); ++k) per_param[counted[k]] = sums[k];
  return per_param;
}

// Σ of the counted parameters' sums in table order, over every group (group < 0) or one.
double params_sum_of_squares(const model::ParamTable& table, const std::vector<double>& per_param,
                             int group) {
  double sum = 0.0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& param = table[i];
    if (group >= 0 && static_cast<int>(param.group) != group) continue;
    if (!counts(table, param)) continue;
    sum += per_param[i];
  }
  return sum;
}

}  // namespace

double global_grad_norm(const ops::DeviceContext& ctx, const model::ParamTable& table,
                        tensor::Tensor grads, NormRule rule, dist::Communicator* model_parallel) {
  const auto root = [&](double sum) { return root_through_fp32(sum, model_parallel); };
  if (grads.dtype() != tensor::DType::kFloat32 || grads.numel() != table.buffer_numel()) {
    base::fail("global_grad_norm: gradients must be an fp32 buffer of ", table.buffer_numel(),
               " elements, got ", tensor::dtype_name(grads.dtype()), " of ", grads.numel());
  }
  const std::vector<double> per_param = param_sums_of_squares(ctx, table, grads);
  const auto sum_of = [&](int group) { return params_sum_of_squares(table, per_param, group); };
  switch (rule) {
    case NormRule::kFp32Engine: {
      const double norm = root(sum_of(-1));
      // `total_norm / dp_world_size` goes through another FloatTensor for the DP all-reduce.
      return static_cast<double>(static_cast<float>(norm));
    }
    case NormRule::kFp16Optimizer:
      return finite_or_minus_one(root(sum_of(-1)));
    case NormRule::kZero: {
      double total = 0.0;
      for (int g = 0; g < model::kNumDecayGroups; ++g) {
        const double group_norm = finite_or_minus_one(root(sum_of(g)));
        total += group_norm * group_norm;
      }
      return std::sqrt(total);
    }
    case NormRule::kBf16:
      return finite_or_minus_one(root(sum_of(-1)));
  }
  return -1.0;
}

double global_grad_norm(const model::ParamTable& table, tensor::Tensor grads, NormRule rule,
                        dist::Communicator* model_parallel) {
  return global_grad_norm(ops::DeviceContext{}, table, grads, rule, model_parallel);
}

double clip_coefficient(double max_norm, double norm) {
  return max_norm / (norm + 1e-6);
}

double combined_unscale_factor(double loss_scale, double scaled_norm, double max_norm) {
  double combined = loss_scale;
  if (max_norm > 0.0) {
    const double clip = ((scaled_norm / loss_scale) + 1e-6) / max_norm;
    if (clip > 1.0) combined = clip * loss_scale;
  }
  return combined;
}

void scale_gradients(const ops::DeviceContext& ctx, tensor::Tensor grads, double factor) {
  ops::scale(ctx, grads, grads, static_cast<float>(factor));
}

void scale_gradients(tensor::Tensor grads, double factor) {
  scale_gradients(ops::DeviceContext{}, grads, factor);
}

}  // namespace mds::train
