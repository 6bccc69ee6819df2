#include <cblas.h>
#include <gtest/gtest.h>

#include "ops/cpu/gemm.h"
#include "ops/cpu/openblas_kernels.h"

namespace mds::ops::cpu {
namespace {

constexpr X86VectorFeatures kSseOnly{};
constexpr X86VectorFeatures kAvx{true, false, false};
constexpr X86VectorFeatures kAvx2{true, true, false};
constexpr X86VectorFeatures kAvx512{true, true, true};

TEST(OpenBlasKernels, FallbackFamiliesAreWidenedToWhatTheCpuRuns) {
  // OpenBLAS 0.3.21 on Emerald Rapids (family 6 model 207): Prescott.
  EXPECT_EQ(wider_openblas_core("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(wider_openblas_core("Prescott", kAvx2), "Haswell");
  EXPECT_EQ(wider_openblas_core("Prescott", kAvx), "Sandybridge");
  EXPECT_EQ(wider_openblas_core("Nehalem", kAvx2), "Haswell");
  EXPECT_EQ(wider_openblas_core("Sandybridge", kAvx512), "SkylakeX");
  EXPECT_EQ(wider_openblas_core("Haswell", kAvx512), "SkylakeX");
  EXPECT_EQ(wider_openblas_core("Zen", kAvx512), "SkylakeX");    // Zen 4 before OpenBLAS knew it
  EXPECT_EQ(wider_openblas_core("PRESCOTT", kAvx2), "Haswell");  // names compare without case
}

TEST(OpenBlasKernels, AsWideAsTheCpuOrUnknownIsLeftAlone) {
  EXPECT_EQ(wider_openblas_core("SkylakeX", kAvx512), std::nullopt);
  EXPECT_EQ(wider_openblas_core("Cooperlake", kAvx512), std::nullopt);
  EXPECT_EQ(wider_openblas_core("SapphireRapids", kAvx512), std::nullopt);
  EXPECT_EQ(wider_openblas_core("Haswell", kAvx2), std::nullopt);
  EXPECT_EQ(wider_openblas_core("Zen", kAvx2), std::nullopt);
  EXPECT_EQ(wider_openblas_core("SkylakeX", kAvx2), std::nullopt);  // never narrower
  EXPECT_EQ(wider_openblas_core("Prescott", kSseOnly), std::nullopt);
  EXPECT_EQ(wider_openblas_core("armv8", kAvx512), std::nullopt);
  EXPECT_EQ(wider_openblas_core("", kAvx512), std::nullopt);
}

TEST(OpenBlasKernels, GemmsRunOnTheWidestFamilyUnlessTheUserChose) {
  float a = 2.0f, b = 3.0f, c = 0.0f;
  gemm(1, 1, 1, 1.0f, {&a, 1, false}, {&b, 1, false}, 0.0f, &c, 1);
  EXPECT_EQ(c, 6.0f);
  const OpenBlasKernelChoice& choice = openblas_kernel_choice();
  EXPECT_EQ(choice.used, openblas_get_corename());
  if (choice.user_chose) {
    EXPECT_EQ(choice.used, choice.loaded);
  } else {
    EXPECT_EQ(wider_openblas_core(choice.used, this_cpu_features()), std::nullopt)
        << "loaded " << choice.loaded << ", using " << choice.used;
  }
}

}  // namespace
}  // namespace mds::ops::cpu
