// Prints a markdown table of model-state memory per rank (GiB) for GPT-2 124M, 350M and 1.5B under
// ZeRO stages 0-3 at D = 1, 8, 64: the planner (train/zero_memory, from the real layouts) next to
// the ZeRO paper's formula, for mixed-precision Adam and for fp32 Adam. For docs/performance.md.
// GiB = 2^30 bytes; the difference column is what padding adds (mixed precision): GPT-2 widths are
// multiples of 64, so the table buffer has no gaps and only the 2·D group padding remains.
#include <cstdint>
#include <cstdio>
#include <exception>

#include "model/param_table.h"
#include "train/zero_memory.h"
#include "train/zero_partition.h"

namespace {

struct Size {
  const char* name;
  std::int64_t layers;
  std::int64_t hidden;
  std::int64_t heads;
};

double gib(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

void print_table() {
  using mds::train::StatePrecision;
  const Size sizes[] = {{"124M", 12, 768, 12}, {"350M", 24, 1024, 16}, {"1.5B", 48, 1600, 25}};
  std::printf(
      "| model | Ψ | D | ZeRO stage | mixed planner | mixed paper | planner − paper (KiB) | fp32 "
      "planner | fp32 paper |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Size& size : sizes) {
    const mds::model::ParamTable table = mds::model::ParamTable::build(
        mds::train::gpt2_memory_config(size.layers, size.hidden, size.heads));
    const std::int64_t psi = table.local_numel();
    for (const std::int64_t dp : {1, 8, 64}) {
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

}  // namespace

int main() {
  try {
    print_table();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zero_memory_table: %s\n", error.what());
    return 1;
  }
  return 0;
}
