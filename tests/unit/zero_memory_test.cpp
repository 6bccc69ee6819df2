#include "train/zero_memory.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "base/error.h"
#include "model/param_table.h"
#include "train/zero_partition.h"

namespace mds::train {
namespace {

// The ZeRO paper's running example (Figure 1): Ψ = 7.5B, N_d = 64, K = 12.
TEST(ZeroMemory, PaperFormulaForTheFigureOneExample) {
  const std::int64_t psi = 7'500'000'000;
  const ModelStateBytes baseline = paper_model_state_bytes(psi, 64, 0);
  EXPECT_DOUBLE_EQ(baseline.total(), 120e9);
  EXPECT_DOUBLE_EQ(baseline.params, 15e9);
  EXPECT_DOUBLE_EQ(baseline.grads, 15e9);
  EXPECT_DOUBLE_EQ(baseline.optimizer, 90e9);
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(psi, 64, 1).total(), 31.40625e9);   // ≈ 31.4 GB
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(psi, 64, 2).total(), 16.640625e9);  // ≈ 16.6 GB
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(psi, 64, 3).total(), 1.875e9);      // ≈ 1.9 GB
  // Without data parallelism every stage is the baseline.
  for (int stage = 0; stage <= 3; ++stage) {
    EXPECT_DOUBLE_EQ(paper_model_state_bytes(psi, 1, stage).total(), 120e9) << stage;
  }
}

TEST(ZeroMemory, PaperFormulaInFp32) {
  // 4 + 4 + 8 bytes: no master copy, the weights are already fp32.
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(1000, 4, 0, StatePrecision::kFp32).total(), 16000);
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(1000, 4, 1, StatePrecision::kFp32).total(), 10000);
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(1000, 4, 2, StatePrecision::kFp32).total(), 7000);
  EXPECT_DOUBLE_EQ(paper_model_state_bytes(1000, 4, 3, StatePrecision::kFp32).total(), 4000);
}

TEST(ZeroMemory, PlannerFollowsThePaperForGpt2Small) {
  const model::ParamTable table = model::ParamTable::build(gpt2_memory_config(12, 768, 12));
  const std::int64_t psi = table.local_numel();
  EXPECT_EQ(psi, 124'475'904);
  for (const StatePrecision precision : {StatePrecision::kMixed, StatePrecision::kFp32}) {
    for (const std::int64_t dp : {1, 2, 4, 8}) {
      const ZeroLayout layout(table, dp);
      for (int stage = 0; stage <= 3; ++stage) {
        const ModelStateBytes plan = plan_model_state_bytes(layout, stage, precision);
        const ModelStateBytes paper = paper_model_state_bytes(psi, dp, stage, precision);
        // Padding only adds, and only a little.
        EXPECT_GE(plan.total(), paper.total()) << dp << " " << stage;
        EXPECT_LT(plan.total(), paper.total() * 1.05) << dp << " " << stage;
        EXPECT_GE(plan.params, paper.params);
        EXPECT_GE(plan.grads, paper.grads);
        EXPECT_GE(plan.optimizer, paper.optimizer);
      }
    }
  }
}

TEST(ZeroMemory, PlannerUsesTheTableBufferAndThePartitions) {
  const model::ParamTable table = model::ParamTable::build(gpt2_memory_config(2, 64, 2));
  const ZeroLayout layout(table, 4);
  const double whole = static_cast<double>(table.buffer_numel());
  const double part = static_cast<double>(layout.partition_numel());
  const ModelStateBytes s0 = plan_model_state_bytes(layout, 0);
  EXPECT_DOUBLE_EQ(s0.params, 2 * whole);
  EXPECT_DOUBLE_EQ(s0.grads, 2 * whole);
  EXPECT_DOUBLE_EQ(s0.optimizer, 12 * whole);
  const ModelStateBytes s1 = plan_model_state_bytes(layout, 1);
  EXPECT_DOUBLE_EQ(s1.grads, 2 * whole);
  EXPECT_DOUBLE_EQ(s1.optimizer, 12 * part);
  const ModelStateBytes s2 = plan_model_state_bytes(layout, 2);
  EXPECT_DOUBLE_EQ(s2.params, 2 * whole);
  EXPECT_DOUBLE_EQ(s2.grads, 2 * part);
  const ModelStateBytes s3 = plan_model_state_bytes(layout, 3, StatePrecision::kFp32);
  EXPECT_DOUBLE_EQ(s3.total(), 16 * part);
}

TEST(ZeroMemory, RejectsBadArguments) {
  const model::ParamTable table = model::ParamTable::build(gpt2_memory_config(2, 64, 2));
  const ZeroLayout layout(table, 2);
  EXPECT_THROW(plan_model_state_bytes(layout, 4), base::Error);
  EXPECT_THROW(paper_model_state_bytes(100, 2, -1), base::Error);
  EXPECT_THROW(paper_model_state_bytes(100, 0, 1), base::Error);
  EXPECT_THROW(gpt2_memory_config(2, 64, 3), base::Error);  // 64 not divisible by 3 heads
}

}  // namespace
}  // namespace mds::train
