#include "ops/cpu/openblas_kernels.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <utility>

namespace mds::ops::cpu {

namespace {

enum class VectorWidth { kUnknown, kSse, kAvx, kAvx2, kAvx512 };

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// OpenBLAS's x86-64 core names (driver/others/dynamic.c) by the widest vectors their kernels use.
VectorWidth family_width(std::string_view core) {
  static constexpr std::array<std::pair<std::string_view, VectorWidth>, 26> kFamilies{{
      {"Katmai", VectorWidth::kSse},        {"Coppermine", VectorWidth::kSse},
      {"Northwood", VectorWidth::kSse},     {"Prescott", VectorWidth::kSse},
      {"Banias", VectorWidth::kSse},        {"Atom", VectorWidth::kSse},
      {"Core2", VectorWidth::kSse},         {"Penryn", VectorWidth::kSse},
      {"Dunnington", VectorWidth::kSse},    {"Nehalem", VectorWidth::kSse},
      {"Athlon", VectorWidth::kSse},        {"Opteron", VectorWidth::kSse},
      {"Opteron_SSE3", VectorWidth::kSse},  {"Barcelona", VectorWidth::kSse},
      {"Nano", VectorWidth::kSse},          {"Bobcat", VectorWidth::kSse},
      {"Sandybridge", VectorWidth::kAvx},   {"Bulldozer", VectorWidth::kAvx},
      {"Piledriver", VectorWidth::kAvx},    {"Steamroller", VectorWidth::kAvx},
      {"Excavator", VectorWidth::kAvx2},    {"Haswell", VectorWidth::kAvx2},
      {"Zen", VectorWidth::kAvx2},          {"SkylakeX", VectorWidth::kAvx512},
      {"Cooperlake", VectorWidth::kAvx512}, {"SapphireRapids", VectorWidth::kAvx512},
  }};
  for (const auto& [name, width] : kFamilies) {
    if (same_name(core, name)) return width;
  }
  return VectorWidth::kUnknown;
}

VectorWidth widest(X86VectorFeatures cpu) {
  if (cpu.avx512) return VectorWidth::kAvx512;
  if (cpu.avx2_fma) return VectorWidth::kAvx2;
  if (cpu.avx) return VectorWidth::kAvx;
  return VectorWidth::kSse;
}

std::string core_name() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

OpenBlasKernelChoice choose_kernels() {
  OpenBlasKernelChoice choice;
  choice.loaded = core_name();
  choice.used = choice.loaded;
  choice.user_chose = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const std::optional<std::string> wider = wider_openblas_core(choice.loaded, this_cpu_features());
  if (choice.user_chose || !wider) return choice;
  // Exported by DYNAMIC_ARCH builds only: a single-target OpenBLAS has nothing to switch.
  using Hook = void (*)();
  const auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return choice;
  setenv("OPENBLAS_CORETYPE", wider->c_str(), 0);
  quit();
  init();
  choice.used = core_name();
  return choice;
}

}  // namespace

X86VectorFeatures this_cpu_features() {
  X86VectorFeatures cpu;
#if defined(__x86_64__)
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
#endif
  return cpu;
}

std::optional<std::string> wider_openblas_core(std::string_view chosen, X86VectorFeatures cpu) {
  const VectorWidth have = family_width(chosen);
  const VectorWidth can = widest(cpu);
  if (have == VectorWidth::kUnknown || have >= can) return std::nullopt;
  switch (can) {
    case VectorWidth::kAvx512:
      return "SkylakeX";
    case VectorWidth::kAvx2:
      return "Haswell";
    case VectorWidth::kAvx:
      return "Sandybridge";
    default:
      return std::nullopt;
  }
}

const OpenBlasKernelChoice& openblas_kernel_choice() {
  static const OpenBlasKernelChoice choice = choose_kernels();
  return choice;
}

}  // namespace mds::ops::cpu
