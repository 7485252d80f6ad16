// Which OpenBLAS kernel set ("core") suits this CPU, for the launcher to
// put in its children's environment as OPENBLAS_CORETYPE.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels at load time from
// cpuid; older releases do not know newer CPUs and fall back to a weaker
// set (an AVX-512 CPU served AVX2 "Zen"/"Haswell" kernels, an AVX2 CPU of
// an unknown family served "Sandybridge" or older). OPENBLAS_CORETYPE,
// read once when the library loads, overrides that choice, so it has to
// be set in a process's environment before it starts: a launcher decides,
// its children load OpenBLAS with it.
//
//   const CpuFeatures f = DetectCpuFeatures();
//   const std::string core = RecommendedOpenblasCoretype(f, OpenblasCoreName());
//   if (!core.empty() && getenv("OPENBLAS_CORETYPE") == nullptr)   // never override the user
//     child_env.push_back("OPENBLAS_CORETYPE=" + core);
//
// Never set an empty OPENBLAS_CORETYPE: OpenBLAS treats it as a name that
// matches no core and falls back to a default of its own (on this repo's
// Zen 3 machine, "" gave "Haswell" instead of the detected "Zen"), so an
// empty value is not the same as leaving the variable unset.
//
// Measured on the development machine (AMD EPYC, family 25 model 1 = Zen 3,
// AVX2 + FMA, no AVX-512, OpenBLAS 0.3.21): OpenBLAS picks "Zen"; "Haswell"
// is equally fast at the MLP's GEMM shapes (within noise, thread CPU time),
// "Sandybridge" 20-40% slower, "SkylakeX" dies with SIGILL. So here the
// recommendation is "" (keep OpenBLAS's choice).
//
// Thread-safety: all functions are thread-safe. Nothing fails: a missing
// cpuid leaf reads as "feature absent", and OpenblasCoreName() is "" when
// the linked OpenBLAS cannot tell (not a DYNAMIC_ARCH build).
#ifndef TANDEM_COMMON_KERNELS_BLAS_CORE_H_
#define TANDEM_COMMON_KERNELS_BLAS_CORE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tandem {
namespace kernels {

// The x86 features that decide the OpenBLAS kernel set. A vector ISA counts
// only when the OS also saves its registers (XCR0 via xgetbv): a CPU with
// AVX-512 under a kernel or hypervisor that does not enable the ZMM state
// cannot run AVX-512 kernels.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512cd = false;
  bool avx512_bf16 = false;
  bool os_avx = false;     // XCR0: SSE and AVX (YMM) state enabled
  bool os_avx512 = false;  // XCR0: opmask, ZMM_Hi256 and Hi16_ZMM state enabled
};

// AVX2 + FMA usable (what OpenBLAS's Haswell / Zen kernels need).
bool HasUsableAvx2(const CpuFeatures& f);
// AVX-512 F/CD/BW/DQ/VL usable (what its SkylakeX kernels need).
bool HasUsableAvx512(const CpuFeatures& f);

// Reads this CPU's features (cpuid leaves 1 and 7, xgetbv). All false on a
// non-x86 build.
CpuFeatures DetectCpuFeatures();

// The linked OpenBLAS's openblas_get_corename() ("Zen", "Haswell", ...).
std::string OpenblasCoreName();
// openblas_get_config() ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... Zen MAX_THREADS=64").
std::string OpenblasConfig();

// The OPENBLAS_CORETYPE value to give child processes, or "" when
// OpenBLAS's own choice `corename` is already the right one (or cannot be
// improved on: no AVX2, or a name this function does not know). Pure.
//  - AVX-512 usable, corename an AVX2-or-older set -> "SkylakeX"
//    (Cooperlake / SapphireRapids / SkylakeX are kept as chosen);
//  - AVX2 + FMA usable, corename a pre-AVX2 set (Sandybridge, Nehalem,
//    Core2, Prescott, Barcelona, Bulldozer..., or Unknown) -> "Haswell";
//  - otherwise "". Never names a set the CPU cannot run.
// Core names compare case-insensitively, as OpenBLAS does.
std::string RecommendedOpenblasCoretype(const CpuFeatures& features,
                                        absl::string_view corename);

// What a launcher puts in a child's environment: "OPENBLAS_CORETYPE=<core>"
// when RecommendedOpenblasCoretype names one and the user has not set the
// variable (`user_value` = getenv("OPENBLAS_CORETYPE"), nullptr if unset:
// a value already set — even an empty one — always wins and is passed
// through untouched), else "". Pure.
std::string OpenblasCoretypeForChildren(const char* user_value, const CpuFeatures& features,
                                        absl::string_view corename);

}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_BLAS_CORE_H_
