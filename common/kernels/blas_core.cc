#include "common/kernels/blas_core.h"

#include <cblas.h>

#include <cstdint>

#include "absl/strings/ascii.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tandem {
namespace kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t Xgetbv0() {
  uint32_t eax = 0, edx = 0;
  // xgetbv with ecx = 0 (XCR0); only valid when CPUID.1:ECX.OSXSAVE is set.
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

// OpenBLAS kernel sets that are the best it has for their ISA level: an
// AVX-512 one is never replaced; an AVX2 one only on an AVX-512 CPU.
bool IsAvx512Core(const std::string& c) {
  return c == "skylakex" || c == "cooperlake" || c == "sapphirerapids";
}
bool IsAvx2Core(const std::string& c) { return c == "haswell" || c == "zen"; }
// The x86 sets older than AVX2 (openblas dynamic.c's corename table).
bool IsPreAvx2Core(const std::string& c) {
  static const char* const kOld[] = {
      "unknown",  "katmai",       "coppermine", "northwood", "prescott",  "banias",
      "atom",     "core2",        "penryn",     "dunnington", "nehalem",  "athlon",
      "opteron",  "opteron_sse3", "barcelona",  "nano",      "sandybridge", "bobcat",
      "bulldozer", "piledriver",  "steamroller", "excavator"};
  for (const char* o : kOld) {
    if (c == o) return true;
  }
  return false;
}

}  // namespace

bool HasUsableAvx2(const CpuFeatures& f) { return f.os_avx && f.avx && f.avx2 && f.fma; }

bool HasUsableAvx512(const CpuFeatures& f) {
  return HasUsableAvx2(f) && f.os_avx512 && f.avx512f && f.avx512cd && f.avx512bw &&
         f.avx512dq && f.avx512vl;
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  f.fma = Bit(ecx, 12);
  f.avx = Bit(ecx, 28);
  const bool osxsave = Bit(ecx, 27);
  if (osxsave) {
    const uint64_t xcr0 = Xgetbv0();
    f.os_avx = (xcr0 & 0x6) == 0x6;      // SSE | AVX
    f.os_avx512 = (xcr0 & 0xe6) == 0xe6;  // + opmask | ZMM_Hi256 | Hi16_ZMM
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    f.avx2 = Bit(ebx, 5);
    f.avx512f = Bit(ebx, 16);
    f.avx512dq = Bit(ebx, 17);
    f.avx512cd = Bit(ebx, 28);
    f.avx512bw = Bit(ebx, 30);
    f.avx512vl = Bit(ebx, 31);
    const uint32_t max_sub = eax;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, eax, ebx, ecx, edx);
      f.avx512_bf16 = Bit(eax, 5);
    }
  }
#endif
  return f;
}

std::string OpenblasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

std::string OpenblasConfig() {
  const char* config = openblas_get_config();
  return config == nullptr ? std::string() : std::string(config);
}

std::string RecommendedOpenblasCoretype(const CpuFeatures& features,
                                        absl::string_view corename) {
  const std::string core = absl::AsciiStrToLower(corename);
  if (IsAvx512Core(core)) return "";
  if (HasUsableAvx512(features) && (IsAvx2Core(core) || IsPreAvx2Core(core))) {
    return "SkylakeX";
  }
  if (HasUsableAvx2(features) && IsPreAvx2Core(core)) return "Haswell";
  return "";
}

std::string OpenblasCoretypeForChildren(const char* user_value, const CpuFeatures& features,
                                        absl::string_view corename) {
  if (user_value != nullptr) return "";  // the user's choice stands
  const std::string core = RecommendedOpenblasCoretype(features, corename);
  return core.empty() ? "" : "OPENBLAS_CORETYPE=" + core;
}

}  // namespace kernels
}  // namespace tandem
