// Prints two markdown tables of model-state memory per rank for GPT-2 124M, 350M and 1.5B, for
// docs/performance.md:
//   1. the ZeRO paper's model (train/zero_memory): its formula next to the same model over our
//      real layouts, for stages 0-3 at D = 1, 8, 64, mixed-precision and fp32 Adam;
//   2. what mds's optimizer allocates (train/optimizer_memory, held equal to the optimizer's own
//      buffers by a unit test) for every precision and ZeRO stage it implements at D = 1, 8, 64:
//      bytes per parameter of the weights (with, for bf16/fp16 computing in fp32 — the host's
//      default —, the fp32 copy the model computes from; a bf16/fp16 run on a CUDA device computes
//      with 16-bit activations from the 16-bit weights and has none), the gradients (the
//      micro-batch buffer and the accumulator), the fp32 master and Adam moments, the collectives'
//      staging, and the total in GiB.
// GiB = 2^30 bytes. GPT-2 widths are multiples of 64, so the table buffer has no gaps and only the
// 2·D group padding separates planner and paper.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "model/param_table.h"
#include "train/mixed_precision_optimizer.h"
#include "train/optimizer_memory.h"
#include "train/zero_memory.h"
#include "train/zero_partition.h"

namespace {

using mds::train::BufferBytes;
using mds::train::Precision;

struct Size {
  const char* name;
  std::int64_t layers;
  std::int64_t hidden;
  std::int64_t heads;
};

constexpr Size kSizes[] = {{"124M", 12, 768, 12}, {"350M", 24, 1024, 16}, {"1.5B", 48, 1600, 25}};
constexpr std::int64_t kDataParallel[] = {1, 8, 64};

double gib(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

mds::model::ParamTable table_of(const Size& size) {
  return mds::model::ParamTable::build(
      mds::train::gpt2_memory_config(size.layers, size.hidden, size.heads));
}

void print_paper_table() {
  using mds::train::StatePrecision;
  std::printf(
      "| model | Ψ | D | ZeRO stage | mixed planner | mixed paper | planner − paper (KiB) | fp32 "
      "planner | fp32 paper |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Size& size : kSizes) {
    const mds::model::ParamTable table = table_of(size);
    const std::int64_t psi = table.local_numel();
    for (const std::int64_t dp : kDataParallel) {
      const mds::train::ZeroLayout layout(table, dp);
      for (int stage = 0; stage <= 3; ++stage) {
        const auto plan = [&](StatePrecision p) {
          return gib(mds::train::plan_model_state_bytes(layout, stage, p).total());
        };
        const auto paper = [&](StatePrecision p) {
          return gib(mds::train::paper_model_state_bytes(psi, dp, stage, p).total());
        };
        const double extra = plan(StatePrecision::kMixed) - paper(StatePrecision::kMixed);
        std::printf("| %s | %lld | %lld | %d | %.3f | %.3f | %.2f | %.3f | %.3f |\n", size.name,
                    static_cast<long long>(psi), static_cast<long long>(dp), stage,
                    plan(StatePrecision::kMixed), paper(StatePrecision::kMixed),
                    extra * 1024.0 * 1024.0, plan(StatePrecision::kFp32),
                    paper(StatePrecision::kFp32));
      }
    }
  }
}

// Bytes of the named buffers in `buffers`.
double sum_of(const std::vector<BufferBytes>& buffers,
              std::initializer_list<std::string_view> names) {
  double total = 0;
  for (const BufferBytes& buffer : buffers) {
    for (const std::string_view name : names) {
      if (buffer.name == name) total += static_cast<double>(buffer.bytes);
    }
  }
  return total;
}

void print_mds_table() {
  struct Layout {
    Precision precision;
    int stage;
    bool compute_copy = true;  // fp32 activations (a 16-bit run on the host)
  };
  const Layout layouts[] = {
      {Precision::kFp32, 0},        {Precision::kFp32, 1},        {Precision::kFp32, 2},
      {Precision::kBf16, 0},        {Precision::kBf16, 0, false}, {Precision::kFp16, 0},
      {Precision::kFp16, 0, false}, {Precision::kFp16, 1},        {Precision::kFp16, 1, false},
      {Precision::kFp16, 2},        {Precision::kFp16, 2, false}};
  std::printf(
      "| model | precision | activations | ZeRO stage | D | weights (+ compute copy) | gradients | "
      "master + Adam | staging (MiB) | total (GiB) | bytes/param |\n");
  std::printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Size& size : kSizes) {
    const mds::model::ParamTable table = table_of(size);
    const double psi = static_cast<double>(table.local_numel());
    for (const Layout& layout : layouts) {
      for (const std::int64_t dp : kDataParallel) {
        mds::train::OptimizerOptions options;
        options.precision = layout.precision;
        options.zero_stage = layout.stage;
        // DeepSpeed 0.8.3's defaults: bf16 and fp16 communicate in their own dtype, fp32 ZeRO
        // in fp16, fp32 stage 0 in fp32.
        options.communication_dtype = layout.precision == Precision::kBf16
                                          ? mds::tensor::DType::kBFloat16
                                      : layout.precision == Precision::kFp16 || layout.stage >= 1
                                          ? mds::tensor::DType::kFloat16
                                          : mds::tensor::DType::kFloat32;
        options.fp32_compute_copy = layout.compute_copy;
        const std::vector<BufferBytes> plan = mds::train::plan_optimizer_memory(table, dp, options);
        const double total = static_cast<double>(mds::train::total_bytes(plan));
        std::printf(
            "| %s | %s | %s | %d | %lld | %.2f | %.2f | %.2f | %.1f | %.3f | %.2f |\n", size.name,
            std::string(mds::train::to_string(layout.precision)).c_str(),
            layout.precision == Precision::kFp32 ? "fp32"
            : layout.compute_copy                ? "fp32 (host)"
                                                 : "16-bit (device)",
            layout.stage, static_cast<long long>(dp), sum_of(plan, {"weights", "compute"}) / psi,
            sum_of(plan, {"micro_grads", "grad_accumulator", "partition_accumulator"}) / psi,
            sum_of(plan, {"master", "exp_avg", "exp_avg_sq"}) / psi,
            sum_of(plan, {"staging"}) / (1024.0 * 1024.0), gib(total), total / psi);
      }
    }
  }
}

}  // namespace

int main() {
  try {
    print_paper_table();
    std::printf("\n");
    print_mds_table();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zero_memory_table: %s\n", error.what());
    return 1;
  }
  return 0;
}
