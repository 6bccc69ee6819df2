#include "ops/cpu/dropout.h"

#include <algorithm>
#include <array>

#include "ops/philox.h"

namespace mds::ops::cpu {

namespace {

float keep_scale(const DropoutStream& stream) {
  return static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
}

// Calls body(i, factor) for every element, factor = scale if kept else 0. Elements go in groups of
// four, one Philox block each, and a block's words never depend on which thread draws it.
template <typename Body>
void for_each_masked(std::int64_t n, const DropoutStream& stream, Body body) {
  const float scale = keep_scale(stream);
  const std::int64_t groups = (n + 3) / 4;
#pragma omp parallel for schedule(static)
  for (std::int64_t g = 0; g < groups; ++g) {
    const PhiloxCounter words =
        philox_block(stream.seed, stream.offset, static_cast<std::uint64_t>(g));
    const std::int64_t end = std::min<std::int64_t>(4, n - 4 * g);
    for (std::int64_t lane = 0; lane < end; ++lane) {
      const bool keep = philox_uniform(words[static_cast<std::size_t>(lane)]) >= stream.p;
      body(4 * g + lane, keep ? scale : 0.0f);
    }
  }
}

}  // namespace

void dropout_forward(float* out, const float* x, const float* bias, const float* residual,
                     std::int64_t n, std::int64_t cols, const DropoutStream& stream) {
  for_each_masked(n, stream, [&](std::int64_t i, float factor) {
    const float v = bias != nullptr ? x[i] + bias[i % cols] : x[i];
    out[i] = residual != nullptr ? residual[i] + v * factor : v * factor;
  });
}

void dropout_backward(float* dx, const float* dout, std::int64_t n, const DropoutStream& stream,
                      bool accumulate) {
  for_each_masked(n, stream, [&](std::int64_t i, float factor) {
    dx[i] = accumulate ? dx[i] + dout[i] * factor : dout[i] * factor;
  });
}

void attention_dropout_factors(float* factors, const DropoutStream& stream, std::uint64_t first,
                               std::int64_t count) {
  const float scale = keep_scale(stream);
  std::uint64_t index = first;
  std::int64_t k = 0;
  while (k < count) {
    const PhiloxCounter words = philox_block(stream.seed, stream.offset, index / 8);
    for (std::uint64_t lane = index % 8; lane < 8 && k < count; ++lane, ++index, ++k) {
      factors[k] = philox_uniform16(philox_half(words, index)) >= stream.p ? scale : 0.0f;
    }
  }
}

void dropout_bias_grad(float* dbias, const float* dout, std::int64_t rows, std::int64_t cols,
                       const DropoutStream& stream) {
  const float scale = keep_scale(stream);
  // Blocks of columns per thread and rows in order keep the sums thread-independent. When rows
  // start on a Philox group (cols % 4 == 0) four columns of a row share one Philox block;
  // otherwise each element's block is computed on its own.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
  const std::int64_t lanes = cols % 4 == 0 ? 4 : 1;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t begin = blk * kBlock, end = std::min(cols, begin + kBlock);
    std::array<float, kBlock> sums{};
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = begin; c < end; c += lanes) {
        const auto first = static_cast<std::uint64_t>(r * cols + c);
        const PhiloxCounter words = philox_block(stream.seed, stream.offset, first / 4);
        for (std::int64_t lane = 0; lane < lanes; ++lane) {
          const std::uint64_t i = first + static_cast<std::uint64_t>(lane);
          if (philox_uniform(words[i % 4]) >= stream.p) {
            sums[static_cast<std::size_t>(c + lane - begin)] += dout[i] * scale;
          }
        }
      }
    }
    for (std::int64_t c = begin; c < end; ++c)
      dbias[c] += sums[static_cast<std::size_t>(c - begin)];
  }
}

}  // namespace mds::ops::cpu
