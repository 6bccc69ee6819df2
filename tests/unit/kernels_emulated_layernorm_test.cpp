// The LayerNorm kernels' device code (kernels/layernorm_kernels.cuh) run on the CPU under the SIMT
// emulation with the launch shapes kernels/layernorm.cu uses, against their CPU twins
// (ops/cpu/layernorm; the residual forward against ops::cpu::add then layernorm_forward): forward,
// the residual forward (also in place on the residual), backward dx and the parameter-gradient
// column sums (dweight and dbias together or alone), fp32 and the 16-bit storages. Bounds of
// tests/gpu/layernorm_test.cpp: out, rstd, dx, dweight, dbias 1e-5, mean 1e-6, the residual sum
// bit for bit; 16-bit outputs within one ulp of the fp32 reference rounded once. Outputs start
// poisoned (accumulated ones from known values), guards stay untouched, reruns give the same bits.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/layernorm_kernels.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/layernorm.h"
#include "tests/unit/emulated_column_sums.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace lk = kernels::layernorm_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;

struct Size {
  std::int64_t rows, cols;
};
constexpr float kEps = 1e-5f;

// The fp32 forward's outputs.
struct Forward {
  std::vector<float> out, mean, rstd;
};

Forward cpu_forward(const std::vector<float>& x, const std::vector<float>& weight,
                    const std::vector<float>& bias, Size size) {
  Forward f{std::vector<float>(x.size()), std::vector<float>(static_cast<std::size_t>(size.rows)),
            std::vector<float>(static_cast<std::size_t>(size.rows))};
  ops::cpu::layernorm_forward(f.out.data(), f.mean.data(), f.rstd.data(), x.data(), weight.data(),
                              bias.data(), size.rows, size.cols, kEps);
  return f;
}

template <Storage kS>
void check_forward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const auto n = static_cast<std::size_t>(size.rows * size.cols);
  const auto uc = static_cast<std::size_t>(size.cols), ur = static_cast<std::size_t>(size.rows);
  // An offset mean, as activations have, so the two-pass variance matters.
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(n, 20, 1.0f, 4.0f)));
  const GuardedBuffer<float> weight(emulated::random_floats(uc, 21));
  const GuardedBuffer<float> bias(emulated::random_floats(uc, 22));
  const Forward want = cpu_forward(to_fp32<kS>(x.values()), weight.values(), bias.values(), size);

  GuardedBuffer<T> out(n);
  GuardedBuffer<float> mean(ur), rstd(ur);
  const auto run = [&] {
    out.poison();
    mean.poison();
    rstd.poison();
    lk::with_forward_kernel<kS, Storage::kF32, false>(
        size.rows, lk::warp_chunks(size.cols, {out.data(), x.data(), weight.data(), bias.data()}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(out.data(), mean.data(), rstd.data(), nullptr, x.data(), nullptr, weight.data(),
                   bias.data(), size.rows, size.cols, kEps);
          });
        });
    EXPECT_EQ(out.guard_bytes_written() + mean.guard_bytes_written() + rstd.guard_bytes_written(),
              0u)
        << what;
    return std::make_tuple(out.values(), mean.values(), rstd.values());
  };
  const auto [got_out, got_mean, got_rstd] = run();
  emulated::expect_activation_close<kS>(got_out, want.out, 1e-5, what + " out");
  emulated::expect_close(got_mean, want.mean, 1e-6, what + " mean");
  emulated::expect_close(got_rstd, want.rstd, 1e-5, what + " rstd");
  const auto [again_out, again_mean, again_rstd] = run();
  EXPECT_EQ(bits_of(again_out), bits_of(got_out)) << what << " rerun";
  EXPECT_EQ(bits_of(again_mean), bits_of(got_mean)) << what << " rerun";
}

template <Storage kS>
void check_residual_forward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const auto n = static_cast<std::size_t>(size.rows * size.cols);
  const auto uc = static_cast<std::size_t>(size.cols), ur = static_cast<std::size_t>(size.rows);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(n, 30, -1.0f, 1.0f)));
  GuardedBuffer<T> residual(to_storage<kS>(emulated::random_floats(n, 31, 1.0f, 4.0f)));
  const std::vector<T> residual0 = residual.values();
  const GuardedBuffer<float> weight(emulated::random_floats(uc, 32));
  const GuardedBuffer<float> bias(emulated::random_floats(uc, 33));
  // add, rounded to the storage, then LayerNorm of the rounded sum.
  std::vector<float> sum(n);
  ops::cpu::add(sum.data(), to_fp32<kS>(x.values()).data(), to_fp32<kS>(residual0).data(),
                size.rows * size.cols);
  const std::vector<float> rounded_sum = to_fp32<kS>(to_storage<kS>(sum));
  const Forward want = cpu_forward(rounded_sum, weight.values(), bias.values(), size);

  GuardedBuffer<T> sum_out(n), out(n);
  GuardedBuffer<float> mean(ur), rstd(ur);
  const auto run = [&](T* sum_target) {
    out.poison();
    lk::with_forward_kernel<kS, Storage::kF32, true>(
        size.rows,
        lk::warp_chunks(size.cols, {sum_target, out.data(), x.data(), residual.data(),
                                    weight.data(), bias.data()}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(out.data(), mean.data(), rstd.data(), sum_target, x.data(), residual.data(),
                   weight.data(), bias.data(), size.rows, size.cols, kEps);
          });
        });
    EXPECT_EQ(
        out.guard_bytes_written() + sum_out.guard_bytes_written() + residual.guard_bytes_written(),
        0u)
        << what;
  };
  run(sum_out.data());
  emulated::expect_activation_equal<kS>(sum_out.values(), sum, what + " residual sum");
  emulated::expect_activation_close<kS>(out.values(), want.out, 1e-5, what + " residual out");
  emulated::expect_close(mean.values(), want.mean, 1e-6, what + " residual mean");
  emulated::expect_close(rstd.values(), want.rstd, 1e-5, what + " residual rstd");
  // In place on the residual stream: the same results.
  const std::vector<T> first_out = out.values();
  run(residual.data());
  EXPECT_EQ(bits_of(residual.values()), bits_of(sum_out.values())) << what << " in place";
  EXPECT_EQ(bits_of(out.values()), bits_of(first_out)) << what << " in place";
}

// A backward's inputs (random, seeds from `seed`), the statistics of the CPU forward (both sides
// take the same ones), the starting gradients and the CPU's results from them.
template <Storage kS>
struct BackwardCase {
  using T = typename StorageOf<kS>::Elem;
  BackwardCase(Size size, std::uint32_t seed)
      : n(static_cast<std::size_t>(size.rows * size.cols)),
        x(to_storage<kS>(emulated::random_floats(n, seed, 1.0f, 4.0f))),
        dout(to_storage<kS>(emulated::random_floats(n, seed + 1))),
        weight(emulated::random_floats(static_cast<std::size_t>(size.cols), seed + 2)),
        dx0(to_storage<kS>(emulated::random_floats(n, seed + 4))),
        dweight0(emulated::random_floats(static_cast<std::size_t>(size.cols), seed + 5)),
        dbias0(emulated::random_floats(static_cast<std::size_t>(size.cols), seed + 6)),
        mean(static_cast<std::size_t>(size.rows)),
        rstd(static_cast<std::size_t>(size.rows)) {
    const std::vector<float> wx = to_fp32<kS>(x.values()), wdout = to_fp32<kS>(dout.values());
    const std::vector<float> bias =
        emulated::random_floats(static_cast<std::size_t>(size.cols), seed + 3);
    const Forward forward = cpu_forward(wx, weight.values(), bias, size);
    mean.assign(forward.mean);
    rstd.assign(forward.rstd);
    want_dx = to_fp32<kS>(dx0);
    want_dweight = dweight0;
    want_dbias = dbias0;
    ops::cpu::layernorm_backward(want_dx.data(), want_dweight.data(), want_dbias.data(),
                                 wdout.data(), wx.data(), weight.data(), mean.data(), rstd.data(),
                                 size.rows, size.cols);
  }
  std::size_t n;
  GuardedBuffer<T> x, dout;
  GuardedBuffer<float> weight;
  std::vector<T> dx0;
  std::vector<float> dweight0, dbias0;
  GuardedBuffer<float> mean, rstd;
  std::vector<float> want_dx, want_dweight, want_dbias;
};

// Either parameter gradient alone (`run(with_dweight, with_dbias)` returns dx, dweight, dbias):
// the other stays at its starting values, the given one has the bits it has with both.
template <typename Run>
void expect_either_alone(Run run, const std::vector<float>& dweight,
                         const std::vector<float>& dbias, const std::vector<float>& dweight0,
                         const std::vector<float>& dbias0, const std::string& what) {
  const auto [dx_w, only_dweight, untouched_dbias] = run(true, false);
  EXPECT_EQ(bits_of(only_dweight), bits_of(dweight)) << what;
  EXPECT_EQ(untouched_dbias, dbias0) << what;
  const auto [dx_b, untouched_dweight, only_dbias] = run(false, true);
  EXPECT_EQ(bits_of(only_dbias), bits_of(dbias)) << what;
  EXPECT_EQ(untouched_dweight, dweight0) << what;
}

template <Storage kS>
void check_backward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const BackwardCase<kS> c(size, 40);
  GuardedBuffer<T> dx(c.dx0);
  GuardedBuffer<float> dweight(c.dweight0), dbias(c.dbias0);
  // by_8: the parameter gradients through the kernel layernorm.cu picks (eight columns a thread
  // where cols and alignment allow), else through the one-column kernel.
  const auto run = [&](bool with_dweight, bool with_dbias, bool by_8 = true) {
    dx.assign(c.dx0);
    dweight.assign(c.dweight0);
    dbias.assign(c.dbias0);
    lk::with_backward_dx_kernel<kS, Storage::kF32>(
        size.rows,
        lk::warp_chunks(size.cols, {dx.data(), c.dout.data(), c.x.data(), c.weight.data()}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(dx.data(), c.dout.data(), c.x.data(), c.weight.data(), c.mean.data(),
                   c.rstd.data(), size.rows, size.cols);
          });
        });
    const kernels::detail::ColumnOutputs<2> outputs{
        {with_dweight ? dweight.data() : nullptr, with_dbias ? dbias.data() : nullptr}};
    const auto params = [&](auto kernel, const kernels::detail::LaunchShape& shape) {
      emulated::launch_column_sums<2>(shape, size.rows, size.cols, outputs, [&](const auto& sink) {
        kernel(c.dout.data(), c.x.data(), c.mean.data(), c.rstd.data(), size.rows, size.cols, sink);
      });
    };
    if (by_8) {
      lk::with_backward_params_kernel<kS>(size.rows, size.cols, {c.dout.data(), c.x.data()},
                                          params);
    } else {
      params((lk::backward_params_kernel<kS, false>),
             kernels::detail::column_shape(size.rows, size.cols, lk::kParamsChunkRows));
    }
    EXPECT_EQ(
        dx.guard_bytes_written() + dweight.guard_bytes_written() + dbias.guard_bytes_written(), 0u)
        << what;
    return std::make_tuple(dx.values(), dweight.values(), dbias.values());
  };
  const auto [got_dx, got_dweight, got_dbias] = run(true, true);
  emulated::expect_activation_close<kS>(got_dx, c.want_dx, 1e-5, what + " dx");
  emulated::expect_close(got_dweight, c.want_dweight, 1e-5, what + " dweight");
  emulated::expect_close(got_dbias, c.want_dbias, 1e-5, what + " dbias");
  const auto [again_dx, again_dweight, again_dbias] = run(true, true);
  EXPECT_EQ(bits_of(again_dx), bits_of(got_dx)) << what << " rerun";
  EXPECT_EQ(bits_of(again_dweight), bits_of(got_dweight)) << what << " rerun";
  EXPECT_EQ(bits_of(again_dbias), bits_of(got_dbias)) << what << " rerun";
  // Eight columns a thread sum each column in the same order: the same bits as one column.
  if (kernels::detail::fits_columns8(size.cols, {c.dout.data(), c.x.data()})) {
    const auto [dx_1, dweight_1, dbias_1] = run(true, true, false);
    EXPECT_EQ(bits_of(dweight_1), bits_of(got_dweight)) << what << " one column a thread";
    EXPECT_EQ(bits_of(dbias_1), bits_of(got_dbias)) << what << " one column a thread";
  }
  expect_either_alone(run, got_dweight, got_dbias, c.dweight0, c.dbias0, what);
}

// The fused backward (dx and the parameter sums in one pass, then the finish kernel), for rows
// the warp kernels take with 1 to 4 chunks a lane: dx bit for bit the dx warp kernel's (the same
// expressions); dweight and dbias, added onto their starting values, within 1e-5 of the CPU's and
// the same bits on a rerun (the blocks run in another order each time); either alone leaves the
// other untouched and gives the same bits; the partials and outputs stay inside their guards.
template <Storage kS>
void check_fused_backward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const auto uc = static_cast<std::size_t>(size.cols);
  const BackwardCase<kS> c(size, 60);
  GuardedBuffer<T> dx(c.dx0);
  const int chunks =
      lk::warp_chunks(size.cols, {dx.data(), c.dout.data(), c.x.data(), c.weight.data()});
  ASSERT_TRUE(lk::fused_backward_applies(chunks)) << what;
  lk::with_backward_dx_kernel<kS, Storage::kF32>(
      size.rows, chunks, [&](auto kernel, const kernels::detail::LaunchShape& shape) {
        emulated::launch(shape, [&] {
          kernel(dx.data(), c.dout.data(), c.x.data(), c.weight.data(), c.mean.data(),
                 c.rstd.data(), size.rows, size.cols);
        });
      });
  const std::vector<T> warp_dx = dx.values();

  GuardedBuffer<float> dweight(c.dweight0), dbias(c.dbias0);
  GuardedBuffer<float> partials(static_cast<std::size_t>(2 * lk::fused_chunks(size.rows)) * uc);
  const auto run = [&](bool with_dweight, bool with_dbias) {
    dx.assign(c.dx0);
    dweight.assign(c.dweight0);
    dbias.assign(c.dbias0);
    partials.poison();
    lk::with_fused_backward_kernel<kS, Storage::kF32>(
        size.rows, chunks, [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(dx.data(), c.dout.data(), c.x.data(), c.weight.data(), c.mean.data(),
                   c.rstd.data(), size.rows, size.cols, partials.data());
          });
        });
    const kernels::detail::ColumnOutputs<2> outputs{
        {with_dweight ? dweight.data() : nullptr, with_dbias ? dbias.data() : nullptr}};
    emulated::launch(lk::fused_finish_shape(size.cols), [&] {
      lk::backward_params_finish_kernel(partials.data(), lk::fused_chunks(size.rows), size.cols,
                                        outputs);
    });
    EXPECT_EQ(dx.guard_bytes_written() + dweight.guard_bytes_written() +
                  dbias.guard_bytes_written() + partials.guard_bytes_written(),
              0u)
        << what;
    return std::make_tuple(dx.values(), dweight.values(), dbias.values());
  };
  const auto [got_dx, got_dweight, got_dbias] = run(true, true);
  EXPECT_EQ(bits_of(got_dx), bits_of(warp_dx)) << what << " dx";
  emulated::expect_activation_close<kS>(got_dx, c.want_dx, 1e-5, what + " dx");
  emulated::expect_close(got_dweight, c.want_dweight, 1e-5, what + " dweight");
  emulated::expect_close(got_dbias, c.want_dbias, 1e-5, what + " dbias");
  const auto [again_dx, again_dweight, again_dbias] = run(true, true);
  EXPECT_EQ(bits_of(again_dweight), bits_of(got_dweight)) << what << " rerun";
  EXPECT_EQ(bits_of(again_dbias), bits_of(got_dbias)) << what << " rerun";
  expect_either_alone(run, got_dweight, got_dbias, c.dweight0, c.dbias0, what);
}

template <Storage kS>
void check_storage(const std::vector<Size>& sizes) {
  for (const Size size : sizes) {
    const std::string what = std::string(emulated::storage_name(kS)) + " " +
                             std::to_string(size.rows) + "x" + std::to_string(size.cols);
    check_forward<kS>(size, what);
    check_residual_forward<kS>(size, what);
    check_backward<kS>(size, what);
  }
}

// 16-bit weight and bias (kP = kS, widened on load) against the same values widened to fp32
// (kP = kF32): forward (plain and residual) and backward dx, every output bit for bit (the
// parameter-gradient kernel does not read the weight).
template <Storage kS>
void check_16bit_params(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const auto n = static_cast<std::size_t>(size.rows * size.cols);
  const auto uc = static_cast<std::size_t>(size.cols), ur = static_cast<std::size_t>(size.rows);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(n, 50, 1.0f, 4.0f)));
  const GuardedBuffer<T> residual(to_storage<kS>(emulated::random_floats(n, 51)));
  const GuardedBuffer<T> dout(to_storage<kS>(emulated::random_floats(n, 52)));
  const GuardedBuffer<T> weight16(to_storage<kS>(emulated::random_floats(uc, 53)));
  const GuardedBuffer<T> bias16(to_storage<kS>(emulated::random_floats(uc, 54)));
  const GuardedBuffer<float> weight32(to_fp32<kS>(weight16.values()));
  const GuardedBuffer<float> bias32(to_fp32<kS>(bias16.values()));
  const std::vector<T> dx0 = to_storage<kS>(emulated::random_floats(n, 55));
  GuardedBuffer<T> out(n), sum(n), dx(n);
  GuardedBuffer<float> mean(ur), rstd(ur);
  const auto run = [&]<Storage kP>(const void* weight, const void* bias) {
    std::vector<std::vector<std::uint64_t>> results;
    out.poison();
    lk::with_forward_kernel<kS, kP, false>(
        size.rows, lk::warp_chunks(size.cols, {out.data(), x.data(), weight, bias}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(out.data(), mean.data(), rstd.data(), nullptr, x.data(), nullptr, weight, bias,
                   size.rows, size.cols, kEps);
          });
        });
    for (const auto& v : {bits_of(out.values()), bits_of(mean.values()), bits_of(rstd.values())})
      results.push_back(v);
    out.poison();
    sum.poison();
    lk::with_forward_kernel<kS, kP, true>(
        size.rows,
        lk::warp_chunks(size.cols,
                        {out.data(), sum.data(), x.data(), residual.data(), weight, bias}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(out.data(), mean.data(), rstd.data(), sum.data(), x.data(), residual.data(),
                   weight, bias, size.rows, size.cols, kEps);
          });
        });
    results.push_back(bits_of(out.values()));
    dx.assign(dx0);
    lk::with_backward_dx_kernel<kS, kP>(
        size.rows, lk::warp_chunks(size.cols, {dx.data(), dout.data(), x.data(), weight}),
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch(shape, [&] {
            kernel(dx.data(), dout.data(), x.data(), weight, mean.data(), rstd.data(), size.rows,
                   size.cols);
          });
        });
    results.push_back(bits_of(dx.values()));
    EXPECT_EQ(out.guard_bytes_written() + sum.guard_bytes_written() + dx.guard_bytes_written() +
                  mean.guard_bytes_written() + rstd.guard_bytes_written(),
              0u)
        << what;
    return results;
  };
  const auto wide = run.template operator()<Storage::kF32>(weight32.data(), bias32.data());
  const auto narrow = run.template operator()<kS>(weight16.data(), bias16.data());
  const char* names[] = {" out", " mean", " rstd", " residual out", " dx"};
  for (std::size_t k = 0; k < wide.size(); ++k) EXPECT_EQ(narrow[k], wide[k]) << what << names[k];
}

TEST(KernelsEmulatedLayerNorm, SixteenBitParamsEqualTheirFp32Widening) {
  for (const Size size : {Size{1, 1}, Size{3, 17}, Size{5, 256}, Size{4, 1000}, Size{3, 1600}}) {
    const std::string what = std::to_string(size.rows) + "x" + std::to_string(size.cols);
    check_16bit_params<Storage::kBF16>(size, "bf16 " + what);
    check_16bit_params<Storage::kF16>(size, "fp16 " + what);
  }
}

// Which kernel serves which rows: one warp per row with 1 to 4 or 8 chunks of eight a lane where
// the row is a multiple of 8 of at most 2048 elements and the arrays are 16-byte aligned, one block
// per row elsewhere.
TEST(KernelsEmulatedLayerNorm, WarpKernelsWhereRowsFitTheirChunks) {
  alignas(16) static float buffer[8];
  const void* aligned = buffer;
  const void* off = buffer + 1;
  EXPECT_EQ(lk::warp_chunks(8, {aligned}), 1);
  EXPECT_EQ(lk::warp_chunks(256, {aligned}), 1);
  EXPECT_EQ(lk::warp_chunks(512, {aligned}), 2);
  EXPECT_EQ(lk::warp_chunks(768, {aligned, aligned}), 3);
  EXPECT_EQ(lk::warp_chunks(1024, {aligned}), 4);
  EXPECT_EQ(lk::warp_chunks(1600, {aligned}), 8);
  EXPECT_EQ(lk::warp_chunks(2048, {aligned}), 8);
  EXPECT_EQ(lk::warp_chunks(2056, {aligned}), 0);
  EXPECT_EQ(lk::warp_chunks(1000, {aligned, off}), 0);
  EXPECT_EQ(lk::warp_chunks(17, {aligned}), 0);
}

// Both families: rows the warp kernels take with 1, 2, 3, 4 and 8 chunks a lane (and row counts
// that leave warps of the last block idle), and rows only the block kernels take.
TEST(KernelsEmulatedLayerNorm, Fp32MatchesCpu) {
  check_storage<Storage::kF32>({{1, 1},
                                {3, 17},
                                {7, 255},
                                {5, 256},
                                {4, 1000},
                                {2, 4099},
                                {9, 768},
                                {67, 64},
                                {600, 40},
                                {130, 800},
                                {3, 512},
                                {5, 2048},
                                {2, 2056}});
}

// Rows of 1 to 4 chunks a lane (8 to 1024 elements), fewer rows than a block's warps, a last
// block with part of its rows, several blocks; 66 blocks' partials, more than the finish's lanes
// of a column (kFinishLanes) take in one step.
TEST(KernelsEmulatedLayerNorm, FusedBackwardMatchesCpuAndTheDxKernel) {
  static_assert(2100 / lk::kFusedRows > 2 * lk::kFinishLanes);
  for (const Size size : {Size{1, 8}, Size{3, 40}, Size{33, 256}, Size{70, 768}, Size{31, 1000},
                          Size{65, 1024}, Size{2100, 24}}) {
    const std::string what = std::to_string(size.rows) + "x" + std::to_string(size.cols);
    check_fused_backward<Storage::kF32>(size, "fp32 " + what);
    check_fused_backward<Storage::kBF16>(size, "bf16 " + what);
    check_fused_backward<Storage::kF16>(size, "fp16 " + what);
  }
}

// The fused backward serves the warp kernels' rows up to 4 chunks a lane (1024 elements), not the
// block kernels' (0) nor 8 chunks (GPT-2 1.5B's 1600).
TEST(KernelsEmulatedLayerNorm, FusedBackwardWhereRowsTakeUpToFourChunks) {
  EXPECT_FALSE(lk::fused_backward_applies(0));
  for (const int chunks : {1, 2, 3, 4}) EXPECT_TRUE(lk::fused_backward_applies(chunks));
  EXPECT_FALSE(lk::fused_backward_applies(8));
}

TEST(KernelsEmulatedLayerNorm, Bf16AndFp16WithinOneUlp) {
  check_storage<Storage::kBF16>({{3, 17}, {5, 256}, {4, 1000}, {9, 768}, {3, 1600}, {70, 768}});
  check_storage<Storage::kF16>({{3, 17}, {5, 256}, {4, 1000}, {9, 768}, {3, 1600}});
}

}  // namespace
}  // namespace mds
