#include "train/throughput.h"

#include <gtest/gtest.h>

#include "base/error.h"

#include <cmath>
#include <limits>
#include <regex>
#include <string>

namespace mds::train {
namespace {

// Python 3 format() results for each value ('' where the fixed form is too long to list).
struct Formatted {
  double value;
  const char* e6;
  const char* e3;
  const char* f1;
  const char* f2;
  const char* f3;
  const char* f4;
};

const Formatted kFormatted[] = {
    {0x0.0p+0, "0.000000E+00", "0.000E+00", "0.0", "0.00", "0.000", "0.0000"},
    {-0x0.0p+0, "-0.000000E+00", "-0.000E+00", "-0.0", "-0.00", "-0.000", "-0.0000"},
    {0x1.0000000000000p+0, "1.000000E+00", "1.000E+00", "1.0", "1.00", "1.000", "1.0000"},
    {0x1.0000000000000p-1, "5.000000E-01", "5.000E-01", "0.5", "0.50", "0.500", "0.5000"},
    {0x1.4000000000000p+1, "2.500000E+00", "2.500E+00", "2.5", "2.50", "2.500", "2.5000"},
    {0x1.8000000000000p+0, "1.500000E+00", "1.500E+00", "1.5", "1.50", "1.500", "1.5000"},
    {0x1.0000000000000p-3, "1.250000E-01", "1.250E-01", "0.1", "0.12", "0.125", "0.1250"},
    {0x1.3ffffef39085fp+3, "9.999999E+00", "1.000E+01", "10.0", "10.00", "10.000", "10.0000"},
    {0x1.3ffffeee32224p+3, "9.999999E+00", "1.000E+01", "10.0", "10.00", "10.000", "10.0000"},
    {0x1.56e1fc2f8f359p-997, "1.000000E-300", "1.000E-300", "0.0", "0.00", "0.000", "0.0000"},
    {0x0.0000000000001p-1022, "4.940656E-324", "4.941E-324", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.fffffffffffffp+1023, "1.797693E+308", "1.798E+308", "", "", "", ""},
    {0x1.e240c9fbe76c9p+16, "1.234568E+05", "1.235E+05", "123456.8", "123456.79", "123456.789",
     "123456.7890"},
    {-0x1.6d127d05394fdp-22, "-3.400000E-07", "-3.400E-07", "-0.0", "-0.00", "-0.000", "-0.0000"},
    {0x1.e23a000000000p+16, "1.234500E+05", "1.234E+05", "123450.0", "123450.00", "123450.000",
     "123450.0000"},
    {0x1.00000431bde83p+1, "2.000001E+00", "2.000E+00", "2.0", "2.00", "2.000", "2.0000"},
    {0x1.6052502eec7c9p-17, "1.050000E-05", "1.050E-05", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.f75104d551d69p-15, "6.000000E-05", "6.000E-05", "0.0", "0.00", "0.000", "0.0001"},
    {0x1.f75050b057686p-16, "2.999984E-05", "3.000E-05", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.7ebaf102363b2p-11, "7.300000E-04", "7.300E-04", "0.0", "0.00", "0.001", "0.0007"},
    {0x1.1c37937e08000p+53, "1.000000E+16", "1.000E+16", "10000000000000000.0",
     "10000000000000000.00", "10000000000000000.000", "10000000000000000.0000"},
    {0x1.0f0cf064dd592p+73, "1.000000E+22", "1.000E+22", "10000000000000000000000.0",
     "10000000000000000000000.00", "10000000000000000000000.000", "10000000000000000000000.0000"},
    {0x1.56a95319d63e1p+63, "1.234568E+19", "1.235E+19", "12345678901234567168.0",
     "12345678901234567168.00", "12345678901234567168.000", "12345678901234567168.0000"},
    {-0x1.74de452e6b438p+811, "-1.989033E+244", "-1.989E+244", "", "", "", ""},
    {0x1.3270e269e0d37p+594, "7.761118E+178", "7.761E+178", "", "", "", ""},
    {0x1.c7fd0a6a3a450p-826, "3.980498E-249", "3.980E-249", "0.0", "0.00", "0.000", "0.0000"},
    {-0x1.f0824128b2f33p+292, "-1.543284E+88", "-1.543E+88", "", "", "", ""},
    {0x1.8e811892f902bp-638, "1.364758E-192", "1.365E-192", "0.0", "0.00", "0.000", "0.0000"},
    {-0x1.1985d5d9dc9f8p-684, "-1.370114E-206", "-1.370E-206", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {-0x1.25d940ed90475p+655, "-1.716054E+197", "-1.716E+197", "", "", "", ""},
    {0x1.675cc81e74ef5p-144, "6.294675E-44", "6.295E-44", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.0a35a099950d8p-671, "1.061345E-202", "1.061E-202", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.d549b6f03675ap+689, "4.708325E+207", "4.708E+207", "", "", "", ""},
    {0x1.c172411e20b8fp-38, "6.387016E-12", "6.387E-12", "0.0", "0.00", "0.000", "0.0000"},
    {-0x1.16ece1738f7d9p-814, "-9.973130E-246", "-9.973E-246", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {0x1.1ddb66cad4a26p-781, "8.779753E-236", "8.780E-236", "0.0", "0.00", "0.000", "0.0000"},
    {-0x1.192cfd3ac94afp-755, "-5.795503E-228", "-5.796E-228", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {-0x1.c105d1fb17c23p+809, "-5.988180E+243", "-5.988E+243", "", "", "", ""},
    {-0x1.0b33839263059p-488, "-1.306052E-147", "-1.306E-147", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {-0x1.f48f1a09f76b5p-684, "-2.436118E-206", "-2.436E-206", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {0x1.630f1f29d0da9p-770, "2.233387E-232", "2.233E-232", "0.0", "0.00", "0.000", "0.0000"},
    {-0x1.60af593bd04cfp-673, "-3.515280E-203", "-3.515E-203", "-0.0", "-0.00", "-0.000",
     "-0.0000"},
    {0x1.1e29c658cda14p-820, "1.598738E-247", "1.599E-247", "0.0", "0.00", "0.000", "0.0000"},
    {0x1.d117c6c208ceap+19, "9.525102E+05", "9.525E+05", "952510.2", "952510.21", "952510.211",
     "952510.2112"},
    {-0x1.baca5470c238fp+19, "-9.068346E+05", "-9.068E+05", "-906834.6", "-906834.64",
     "-906834.639", "-906834.6388"},
    {0x1.5e111d610db68p+19, "7.169369E+05", "7.169E+05", "716936.9", "716936.92", "716936.918",
     "716936.9181"},
    {-0x1.9aeb5b597bcf6p+18, "-4.207814E+05", "-4.208E+05", "-420781.4", "-420781.43",
     "-420781.427", "-420781.4273"},
    {-0x1.5b683aaa45910p+19, "-7.114898E+05", "-7.115E+05", "-711489.8", "-711489.83",
     "-711489.833", "-711489.8333"},
    {-0x1.753ff0c352f28p+19, "-7.644155E+05", "-7.644E+05", "-764415.5", "-764415.52",
     "-764415.524", "-764415.5238"},
    {-0x1.760f1683d3ebap+18, "-3.830364E+05", "-3.830E+05", "-383036.4", "-383036.35",
     "-383036.352", "-383036.3518"},
    {0x1.34b796fbd2958p+19, "6.322527E+05", "6.323E+05", "632252.7", "632252.72", "632252.718",
     "632252.7182"},
    {-0x1.37ca67af53826p+19, "-6.385472E+05", "-6.385E+05", "-638547.2", "-638547.24",
     "-638547.240", "-638547.2402"},
    {0x1.3ec029e5c88c0p+17, "1.632003E+05", "1.632E+05", "163200.3", "163200.33", "163200.327",
     "163200.3273"},
    {0x1.0f50bc05c5f08p+18, "2.778269E+05", "2.778E+05", "277826.9", "277826.94", "277826.938",
     "277826.9379"},
    {-0x1.f272750fed2dcp+17, "-2.552049E+05", "-2.552E+05", "-255204.9", "-255204.91",
     "-255204.915", "-255204.9145"},
    {0x1.7500ee717bb10p+16, "9.548893E+04", "9.549E+04", "95488.9", "95488.93", "95488.931",
     "95488.9314"},
    {-0x1.aaf6c19a097dap+19, "-8.744221E+05", "-8.744E+05", "-874422.1", "-874422.05",
     "-874422.050", "-874422.0501"},
    {-0x1.ae13b51f45f35p+19, "-8.807977E+05", "-8.808E+05", "-880797.7", "-880797.66",
     "-880797.660", "-880797.6601"},
    {-0x1.1f2652612b0c2p+19, "-5.880826E+05", "-5.881E+05", "-588082.6", "-588082.57",
     "-588082.574", "-588082.5744"},
    {0x1.6057fc913883cp+18, "3.607999E+05", "3.608E+05", "360799.9", "360799.95", "360799.946",
     "360799.9464"},
    {-0x1.1ad7b1bfa6674p+17, "-1.448154E+05", "-1.448E+05", "-144815.4", "-144815.39",
     "-144815.389", "-144815.3887"},
    {-0x1.6afe6a3117e24p+18, "-3.717057E+05", "-3.717E+05", "-371705.7", "-371705.66",
     "-371705.659", "-371705.6592"},
    {0x1.4e39dd0ed62c0p+17, "1.711237E+05", "1.711E+05", "171123.7", "171123.73", "171123.727",
     "171123.7270"},
};

TEST(PythonFormat, MatchesPythonForFiniteValues) {
  for (const Formatted& f : kFormatted) {
    SCOPED_TRACE(f.e6);
    EXPECT_EQ(python_format_e(f.value, 6), f.e6);
    EXPECT_EQ(python_format_e(f.value, 3), f.e3);
    if (std::string(f.f1).empty()) continue;
    EXPECT_EQ(python_format_f(f.value, 1), f.f1);
    EXPECT_EQ(python_format_f(f.value, 2), f.f2);
    EXPECT_EQ(python_format_f(f.value, 3), f.f3);
    EXPECT_EQ(python_format_f(f.value, 4), f.f4);
  }
}

TEST(PythonFormat, NonFiniteValuesAsPython) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(python_format_e(nan, 6), "NAN");
  EXPECT_EQ(python_format_e(-nan, 6), "NAN");  // Python never prints a sign on NaN
  EXPECT_EQ(python_format_e(inf, 3), "INF");
  EXPECT_EQ(python_format_e(-inf, 3), "-INF");
  EXPECT_EQ(python_format_f(nan, 2), "nan");
  EXPECT_EQ(python_format_f(-nan, 2), "nan");
  EXPECT_EQ(python_format_f(inf, 1), "inf");
  EXPECT_EQ(python_format_f(-inf, 1), "-inf");
}

TEST(PythonFormat, HugeFixedValuesAreComplete) {
  const std::string text = python_format_f(1.7976931348623157e308, 2);
  EXPECT_EQ(text.size(), 309u + 3u);
  EXPECT_EQ(text.substr(0, 6), "179769");
  EXPECT_EQ(text.substr(text.size() - 3), ".00");
}

TEST(PythonFormat, Integers) {
  EXPECT_EQ(python_format_d(-5, 8), "      -5");
  EXPECT_EQ(python_format_d(123456789, 3), "123456789");
  EXPECT_EQ(python_format_d(100, 8), "     100");
  EXPECT_EQ(python_format_d(0, 3), "  0");
}

TEST(Tflops, SpecVectorTinyModel) {
  const FlopsModel model{1024, 2, 64, 50304, true, false};
  const double flops = flops_per_iteration(model, 16);
  EXPECT_EQ(flops, 363730042880.0);  // Python: 363730042880.0 (spec: 3.6373e11)
  EXPECT_EQ(tflops(flops, 1.0, 2), 0.18186502144);
  EXPECT_EQ(python_format_f(tflops(flops, 1.0, 2), 2), "0.18");
  // Without activation checkpointing the factor is 3 instead of 4.
  EXPECT_EQ(flops_per_iteration({1024, 2, 64, 50304, false, false}, 16), 272797532160.0);
}

TEST(Tflops, SpecVectorBloomLike) {
  const FlopsModel model{2048, 70, 14336, 250880, true, false};
  const double flops = flops_per_iteration(model, 2048);
  EXPECT_EQ(flops, 6.021189556492042e+18);
  EXPECT_EQ(tflops(flops, 105.0, 384), 149.3350584447431);  // spec: ≈149.34
  // GLU activations: coefficient 32 instead of 24.
  EXPECT_EQ(flops_per_iteration({2048, 70, 14336, 250880, true, true}, 2048),
            8.028252741989389e+18);
}

TEST(Tflops, ProductBeyond64BitsIsExactBeforeRounding) {
  // 32·4·4096·8192·200·65536² ≈ 3.7e21 overflows int64; Python's unbounded ints do not.
  EXPECT_EQ(flops_per_iteration({8192, 200, 65536, 250880, true, true}, 4096),
            3.770623776017189e+21);
}

TEST(Tflops, RejectsNonPositiveShapes) {
  EXPECT_THROW(flops_per_iteration({0, 2, 64, 50304, true, false}, 16), base::Error);
  EXPECT_THROW(flops_per_iteration({1024, 2, 64, 50304, true, false}, 0), base::Error);
}

TrainingLogFields example_fields() {
  TrainingLogFields f;
  f.iteration = 100;
  f.train_iters = 311541;
  f.consumed_samples = 1600;
  f.consumed_tokens = 3276800;
  f.elapsed_per_iteration = 1.23456;
  f.learning_rate = 2.999983615958057e-05;
  f.global_batch_size = 16;
  f.losses = {{"lm loss", 7.123456789}};
  f.grad_norm = 1.5;
  f.num_zeros = 0.0;
  f.skipped_iterations = 0;
  f.nan_iterations = 0;
  f.samples_per_second = 16 / 1.23456;
  f.tflops = 0.18186502144;
  return f;
}

TEST(TrainingLogLine, Bf16LineCharacterForCharacter) {
  EXPECT_EQ(format_training_log_line(example_fields()),
            " iteration      100/  311541 | consumed samples:         1600 | consumed tokens:      "
            "3276800 | elapsed time per iteration (s): 1.23 | learning rate: 3.000E-05 | global "
            "batch size:    16 | lm loss: 7.123457E+00 | grad norm: 1.500 | num zeros: 0.0 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 | samples per "
            "second: 12.960 | TFLOPs: 0.18 |");
}

TEST(TrainingLogLine, Fp16AndOptionalFields) {
  TrainingLogFields f = example_fields();
  f.loss_scale = 4096.0;
  f.params_norm = 234.56789;
  f.curriculum_seqlen = 64;
  f.skipped_iterations = 3;
  f.nan_iterations = 1234;
  f.grad_norm.reset();
  f.num_zeros.reset();
  EXPECT_EQ(
      format_training_log_line(f),
      " iteration      100/  311541 | consumed samples:         1600 | consumed tokens:      "
      "3276800 | elapsed time per iteration (s): 1.23 | learning rate: 3.000E-05 | global "
      "batch size:    16 | lm loss: 7.123457E+00 | loss scale: 4096.0 | params norm: "
      "234.568 | curriculum seqlen:    64 | number of skipped iterations:   3 | number of nan "
      "iterations: 1234 | samples per second: 12.960 | TFLOPs: 0.18 |");
}

TEST(TrainingLogLine, LossesThatAreNotPositiveAreLeftOut) {
  TrainingLogFields f = example_fields();
  f.losses = {{"lm loss", 0.0}, {"other", std::nan("")}, {"extra", 2.0}};
  const std::string line = format_training_log_line(f);
  EXPECT_EQ(line.find("lm loss"), std::string::npos);
  EXPECT_EQ(line.find("other"), std::string::npos);
  EXPECT_NE(line.find(" | extra: 2.000000E+00 | "), std::string::npos);
}

TEST(TrainingLogLine, MatchesTheSpecRegex) {
  const std::regex spec(
      R"(^ iteration +\d+/ +\d+ \| consumed samples: +\d+ \| consumed tokens: +\d+ \| elapsed time per iteration \(s\): [\d.]+ \| learning rate: [\d.]+E[+-]\d+ \| global batch size: +\d+ \| lm loss: [\d.]+E[+-]\d+ \|)");
  EXPECT_TRUE(std::regex_search(format_training_log_line(example_fields()), spec));
  TrainingLogFields f = example_fields();
  f.learning_rate = 0.0;  // iteration 1 with warmup
  EXPECT_TRUE(std::regex_search(format_training_log_line(f), spec));
  EXPECT_NE(format_training_log_line(f).find("learning rate: 0.000E+00 |"), std::string::npos);
}

TEST(DeepSpeedStepsLine, Format) {
  EXPECT_EQ(format_deepspeed_steps_line(2000, 2.345678, 0.1234, 130.0814),
            "steps: 2000 loss: 2.3457 iter time (s): 0.123 samples/sec: 130.081");
}

// DeepSpeed's f"step={step}, skipped={skipped}, lr={lr}, mom={mom}" with Python's list and tuple
// reprs, behind log_dist's "[Rank 0] ".
TEST(DeepSpeedProgressLine, Format) {
  EXPECT_EQ(format_deepspeed_progress_line(10, 2, 0.0001, 0.9, 0.95, 3),
            "[Rank 0] step=10, skipped=2, lr=[0.0001, 0.0001, 0.0001], "
            "mom=[(0.9, 0.95), (0.9, 0.95), (0.9, 0.95)]");
  EXPECT_EQ(format_deepspeed_progress_line(2000, 0, 5.9999999999999995e-05, 0.9, 0.999, 2),
            "[Rank 0] step=2000, skipped=0, lr=[5.9999999999999995e-05, 5.9999999999999995e-05], "
            "mom=[(0.9, 0.999), (0.9, 0.999)]");
}

}  // namespace
}  // namespace mds::train
