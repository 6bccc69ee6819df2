#include "model/init.h"

#include <array>
#include <cmath>
#include <string_view>

#include "base/error.h"
#include "ops/philox.h"

namespace mds::model {
namespace {

using tensor::DType;

// Every parameter name a table can hold (model/param_table.cpp); its position here, with the spec
// index, identifies a parameter whatever the layout.
constexpr std::array<std::string_view, 18> kNames = {
    "word_embeddings.weight",
    "word_embeddings.norm.weight",
    "word_embeddings.norm.bias",
    "position_embeddings.weight",
    "input_layernorm.weight",
    "input_layernorm.bias",
    "self_attention.query_key_value.weight",
    "self_attention.query_key_value.bias",
    "self_attention.dense.weight",
    "self_attention.dense.bias",
    "post_attention_layernorm.weight",
    "post_attention_layernorm.bias",
    "mlp.dense_h_to_4h.weight",
    "mlp.dense_h_to_4h.bias",
    "mlp.dense_4h_to_h.weight",
    "mlp.dense_4h_to_h.bias",
    "weight",
    "bias",
};

// The Philox stream of a parameter: spec · 32 + name slot, with bit 63 set so that it never meets
// a dropout stream (model/dropout_context.h keeps bit 63 clear).
std::uint64_t parameter_stream(const ParamSpec& spec) {
  for (std::size_t slot = 0; slot < kNames.size(); ++slot) {
    if (kNames[slot] == spec.name) {
      return std::uint64_t{1} << 63 | static_cast<std::uint64_t>(spec.layer) << 5 | slot;
    }
  }
  base::fail("initialize_parameters: no initialization stream for parameter '", spec.name, "'");
}

// Standard normal number `index` of a stream: each Philox block gives four 32-bit words, i.e. two
// Box–Muller pairs, evaluated in double.
double standard_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const ops::PhiloxCounter words = ops::philox_block(seed, stream, index / 4);
  const std::size_t pair = (index % 4) / 2 * 2;
  constexpr double kScale = 1.0 / 4294967296.0;
  const double u1 = (static_cast<double>(words[pair]) + 1.0) * kScale;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(words[pair + 1]) * kScale;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return radius * (index % 2 == 0 ? std::cos(kTwoPi * u2) : std::sin(kTwoPi * u2));
}

// Element index in the unsharded tensor of local element `i` on TP rank `rank`.
std::int64_t global_index(const ParamSpec& spec, std::int64_t i, std::int64_t rank) {
  const tensor::Shape& local = spec.local_shape;
  const std::int64_t cols = local.rank() > 1 ? local.numel() / local[0] : 1;
  switch (spec.split) {
    case TpSplit::kReplicated:
      return i;
    case TpSplit::kColumn:
    case TpSplit::kVocab:
      return rank * local.numel() + i;
    case TpSplit::kRow: {
      const std::int64_t row = i / cols, col = i % cols;
      return row * spec.full_shape[1] + rank * cols + col;
    }
  }
  return i;
}

template <typename Store>
void fill_parameter(const ParamSpec& spec, std::uint64_t seed, std::int64_t tp_rank, Store store) {
  const std::int64_t n = spec.local_numel();
  if (spec.init == InitKind::kOnes || spec.init == InitKind::kZeros) {
    const float value = spec.init == InitKind::kOnes ? 1.0f : 0.0f;
    for (std::int64_t i = 0; i < n; ++i) store(i, value);
    return;
  }
  const std::uint64_t stream = parameter_stream(spec);
  const double std_dev = spec.init_std;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto index = static_cast<std::uint64_t>(global_index(spec, i, tp_rank));
    store(i, static_cast<float>(std_dev * standard_normal(seed, stream, index)));
  }
}

}  // namespace

void initialize_parameters(const ParamBuffer& params, std::uint64_t seed) {
  const ParamTable& table = params.table();
  const std::int64_t tp_rank = table.tp_rank();
  for (std::size_t p = 0; p < table.size(); ++p) {
    const ParamSpec& spec = table[p];
    const tensor::Tensor view = params.view(p);
    switch (params.dtype()) {
      case DType::kFloat32: {
        float* out = view.host_span<float>().data();
        fill_parameter(spec, seed, tp_rank, [out](std::int64_t i, float v) { out[i] = v; });
        break;
      }
      case DType::kBFloat16: {
        tensor::BFloat16* out = view.host_span<tensor::BFloat16>().data();
        fill_parameter(spec, seed, tp_rank,
                       [out](std::int64_t i, float v) { out[i] = tensor::to_bfloat16(v); });
        break;
      }
      case DType::kFloat16: {
        tensor::Float16* out = view.host_span<tensor::Float16>().data();
        fill_parameter(spec, seed, tp_rank,
                       [out](std::int64_t i, float v) { out[i] = tensor::to_float16(v); });
        break;
      }
      default:
        base::fail("initialize_parameters: parameters must be fp32, bf16 or fp16, got ",
                   tensor::dtype_name(params.dtype()));
    }
  }
}

}  // namespace mds::model
