// Run-time selection of a loop's vector width. The build targets x86-64-v2
// (SSE4.2: 128-bit vectors) so the binaries run on any x86-64 server; hot
// element-wise loops are compiled a second time for AVX2+FMA (256-bit) and
// the first call picks one from the CPU's features.
//
//   TANDEM_CPU_INLINE void ScaleBody(float* __restrict x, int64_t n, float a) { ... }
//   TANDEM_CPU_DISPATCHED(Scale, (float* x, int64_t n, float a), (x, n, a))
//   Scale(x, n, 2.f);   // AVX2 body where the CPU has it, else the baseline
//
// The bodies must not depend on the vector width for their results: where a
// library promises bit-exact fp32 (common/optim) it is built with
// -ffp-contract=off, so the FMA target never fuses a multiply and an add.
// Thread-safe (the feature check is a function-local static).
#ifndef TANDEM_COMMON_KERNELS_CPU_DISPATCH_H_
#define TANDEM_COMMON_KERNELS_CPU_DISPATCH_H_

namespace tandem {
namespace kernels {

// True when the CPU has AVX2 and FMA (checked once).
inline bool CpuHasAvx2Fma() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}

}  // namespace kernels
}  // namespace tandem

#define TANDEM_CPU_INLINE inline __attribute__((always_inline))

// Defines name(params): the body `name##Body(args)` compiled for AVX2+FMA
// and for the baseline, dispatched on CpuHasAvx2Fma().
#define TANDEM_CPU_DISPATCHED(name, params, args)                       \
  __attribute__((target("avx2,fma"))) void name##Avx2 params {          \
    name##Body args;                                                    \
  }                                                                     \
  void name##Base params { name##Body args; }                           \
  void name params {                                                    \
    if (::tandem::kernels::CpuHasAvx2Fma()) {                           \
      name##Avx2 args;                                                  \
    } else {                                                            \
      name##Base args;                                                  \
    }                                                                   \
  }

#endif  // TANDEM_COMMON_KERNELS_CPU_DISPATCH_H_
