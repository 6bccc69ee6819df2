// Which of a DYNAMIC_ARCH OpenBLAS's kernel families the CPU backend's GEMMs run on. OpenBLAS picks
// one from CPUID when it loads; Debian 12's 0.3.21 does not know Intel CPUs released after it
// (Emerald Rapids, family 6 model 207, among them) and falls back to its SSE3 "Prescott" kernels,
// which run sgemm five times slower there than the AVX-512 ones the CPU can run (measured in
// docs/performance.md). Before the first GEMM the backend asks for the widest family the CPU
// supports, unless the user chose one with OPENBLAS_CORETYPE.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace mds::ops::cpu {

// The x86 vector extensions OpenBLAS's kernel families are written for, as the OS enables them.
struct X86VectorFeatures {
  bool avx = false;
  bool avx2_fma = false;  // AVX2 and FMA3: Haswell's kernels
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL: SkylakeX's kernels
};

X86VectorFeatures this_cpu_features();

// The OPENBLAS_CORETYPE to ask for when `chosen` (openblas_get_corename()) is a narrower x86 family
// than `cpu` supports; nothing when it is as wide, or not a family this knows (another ISA, a name
// from a newer OpenBLAS).
std::optional<std::string> wider_openblas_core(std::string_view chosen, X86VectorFeatures cpu);

struct OpenBlasKernelChoice {
  std::string loaded;       // the family OpenBLAS picked when it loaded
  std::string used;         // the family the GEMMs run on
  bool user_chose = false;  // OPENBLAS_CORETYPE was set: left as the user asked
};

// Switches the kernels once, on the first call (thread-safe), and returns what happened. Before
// any other OpenBLAS call: the switch re-runs OpenBLAS's own dynamic selection with
// OPENBLAS_CORETYPE set in this process's environment.
const OpenBlasKernelChoice& openblas_kernel_choice();

}  // namespace mds::ops::cpu
