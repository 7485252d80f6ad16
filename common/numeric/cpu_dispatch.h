// Run-time selection of a loop's vector width. The build targets x86-64-v2
// (SSE4.2: 128-bit vectors) so the binaries run on any x86-64 server; hot
// element-wise loops are compiled twice more, for AVX2+FMA (x86-64-v3,
// 256-bit) and for AVX-512 F/BW/DQ/VL (x86-64-v4, 512-bit vectors), and the
// first call picks one from what the CPU and the OS support.
//
// Default: up to AVX2. The loops dispatched here stream through memory
// (optimizer steps over the model, reductions, codecs), and measured on an
// AVX-512 machine (AMD EPYC, 2026-12-03; tools/bench/optim_bench rows per
// width) the 512-bit builds were no faster on 64-byte-aligned buffers and
// 20-40% slower on buffers 16 bytes off a cache line (what large mallocs
// return: every std::vector of optimizer state), while only cache-resident
// data gained (~10-40%). So AVX-512 is built, tested bit-exact and
// selectable (ForceVectorWidth), but not the default.
//
// Compute-bound loops are the exception (TANDEM_CPU_DISPATCHED_COMPUTE:
// GELU's exp and division, the causal softmax, the attention GEMM tiles,
// data resident in cache): they run at the CPU's widest unless a test or
// benchmark forced a width. gpt_breakdown_bench --vector_width, 2026-12-05
// (Xeon with AVX-512, thread CPU time, load ~20): GELU forward 35 -> 21 ms
// and the causal softmax 21 -> 15 ms per step of
// gpt:layers=6,d=384,heads=6,ctx=256 at AVX-512 against AVX2.
//
//   TANDEM_CPU_INLINE void ScaleBody(float* __restrict x, int64_t n, float a) { ... }
//   TANDEM_CPU_DISPATCHED(Scale, (float* x, int64_t n, float a), (x, n, a))
//   Scale(x, n, 2.f);   // the AVX-512 body on such a CPU, AVX2 on others, else the baseline
//
// The bodies must not depend on the vector width for their results: where a
// library promises bit-exact fp32 (common/optim) it is built with
// -ffp-contract=off, so the FMA targets never fuse a multiply and an add.
// Tests cap the width with ForceVectorWidth() to compare every width the
// CPU has with the baseline (SupportedVectorWidths()). Thread-safe (the
// feature check is a function-local static, the cap an atomic).
#ifndef TANDEM_COMMON_NUMERIC_CPU_DISPATCH_H_
#define TANDEM_COMMON_NUMERIC_CPU_DISPATCH_H_

#include <atomic>
#include <vector>

namespace tandem {
namespace numeric {

enum class VectorWidth : int { kSse42 = 0, kAvx2 = 1, kAvx512 = 2 };

// The widest width this CPU runs (checked once; __builtin_cpu_supports also
// checks that the OS saves the registers).
inline VectorWidth CpuVectorWidth() {
  static const VectorWidth w = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
      return VectorWidth::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorWidth::kAvx2;
    return VectorWidth::kSse42;
  }();
  return w;
}

// The widest width dispatched loops use unless told otherwise (see above).
constexpr VectorWidth kDefaultVectorWidthCap = VectorWidth::kAvx2;

inline std::atomic<int>& VectorWidthCap() {
  static std::atomic<int> cap{static_cast<int>(kDefaultVectorWidthCap)};
  return cap;
}

// Whether ForceVectorWidth() set the cap (compute-bound loops then obey it).
inline std::atomic<bool>& VectorWidthForced() {
  static std::atomic<bool> forced{false};
  return forced;
}

// Runs every dispatched loop at no more than `cap` (kAvx512 allows the
// 512-bit builds where the CPU has them). Tests use it to compare widths.
inline void ForceVectorWidth(VectorWidth cap) {
  VectorWidthCap() = static_cast<int>(cap);
  VectorWidthForced() = true;
}
// true: the baseline; false: back to the defaults (streaming loops capped
// at kDefaultVectorWidthCap, compute-bound loops at the CPU's widest).
inline void ForceBaselineVectorWidth(bool force) {
  ForceVectorWidth(force ? VectorWidth::kSse42 : kDefaultVectorWidthCap);
  if (!force) VectorWidthForced() = false;
}

// What dispatched loops run at now: the CPU's widest, under the cap.
inline VectorWidth ActiveVectorWidth() {
  const int cpu = static_cast<int>(CpuVectorWidth());
  const int cap = VectorWidthCap().load(std::memory_order_relaxed);
  return static_cast<VectorWidth>(cpu < cap ? cpu : cap);
}

// What compute-bound loops (TANDEM_CPU_DISPATCHED_COMPUTE) run at: the
// CPU's widest, or ActiveVectorWidth() once a width has been forced.
inline VectorWidth ActiveComputeVectorWidth() {
  return VectorWidthForced().load(std::memory_order_relaxed) ? ActiveVectorWidth()
                                                              : CpuVectorWidth();
}

inline bool CpuHasAvx2Fma() { return ActiveVectorWidth() >= VectorWidth::kAvx2; }

// Every width this CPU can run, narrowest first (for tests).
inline std::vector<VectorWidth> SupportedVectorWidths() {
  std::vector<VectorWidth> out;
  for (int w = 0; w <= static_cast<int>(CpuVectorWidth()); ++w) {
    out.push_back(static_cast<VectorWidth>(w));
  }
  return out;
}

inline const char* VectorWidthName(VectorWidth w) {
  switch (w) {
    case VectorWidth::kAvx512:
      return "avx512";
    case VectorWidth::kAvx2:
      return "avx2";
    default:
      return "sse4.2";
  }
}
// "avx512", "avx2" or "sse4.2": the width dispatched loops run at.
inline const char* VectorWidthName() { return VectorWidthName(ActiveVectorWidth()); }

}  // namespace numeric
}  // namespace tandem

#define TANDEM_CPU_INLINE inline __attribute__((always_inline))

// The target attributes of the wide builds (x86-64-v3 and -v4 vector sets);
// 512-bit vectors are asked for, since GCC otherwise keeps 256 on AVX-512.
#define TANDEM_CPU_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TANDEM_CPU_TARGET_AVX512                                                 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,"           \
                        "prefer-vector-width=512")))

// Defines name(params): the body `name##Body(args)` compiled for AVX-512,
// AVX2+FMA and the baseline, dispatched on `width` (an expression).
#define TANDEM_CPU_DISPATCHED_ON(width, name, params, args)             \
  TANDEM_CPU_TARGET_AVX512 void name##Avx512 params { name##Body args; } \
  TANDEM_CPU_TARGET_AVX2 void name##Avx2 params { name##Body args; }     \
  void name##Base params { name##Body args; }                           \
  void name params {                                                    \
    switch (width) {                                                    \
      case ::tandem::numeric::VectorWidth::kAvx512:                     \
        name##Avx512 args;                                              \
        break;                                                          \
      case ::tandem::numeric::VectorWidth::kAvx2:                       \
        name##Avx2 args;                                                \
        break;                                                          \
      default:                                                          \
        name##Base args;                                                \
    }                                                                   \
  }

// Streaming loops: dispatched on ActiveVectorWidth().
#define TANDEM_CPU_DISPATCHED(name, params, args) \
  TANDEM_CPU_DISPATCHED_ON(::tandem::numeric::ActiveVectorWidth(), name, params, args)

// Compute-bound loops: dispatched on ActiveComputeVectorWidth().
#define TANDEM_CPU_DISPATCHED_COMPUTE(name, params, args) \
  TANDEM_CPU_DISPATCHED_ON(::tandem::numeric::ActiveComputeVectorWidth(), name, params, args)

#endif  // TANDEM_COMMON_NUMERIC_CPU_DISPATCH_H_
