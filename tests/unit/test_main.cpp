// The unit tests' main: GoogleTest's, on one OpenMP thread unless OMP_NUM_THREADS asks for more.
// CTest runs as many tests at once as there are cores, and OpenMP teams of more threads than free
// cores make every barrier wait for a descheduled thread (measured on 2 cores:
// GptModel.GradientsMatchFiniteDifferences 0.35 s alone, 60-85 s beside other tests). Tests of the
// threaded paths set their thread counts themselves. Setting the count can start the OpenMP
// runtime's threads (LLVM's libomp does), so death tests re-run the binary instead of forking it:
// a forked child of a threaded process cannot run LeakSanitizer's exit check.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>

int main(int argc, char** argv) {
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
