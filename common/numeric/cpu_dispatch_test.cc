#include "common/numeric/cpu_dispatch.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace numeric {
namespace {

// A dispatched body that reports which build ran it, so the test can see
// the dispatcher's choice rather than assume it.
int g_ran = -1;
TANDEM_CPU_INLINE void WhichBody(int* out, int build) { *out = build; }
TANDEM_CPU_TARGET_AVX512 void WhichAvx512(int* out) { WhichBody(out, 2); }
TANDEM_CPU_TARGET_AVX2 void WhichAvx2(int* out) { WhichBody(out, 1); }
void WhichBase(int* out) { WhichBody(out, 0); }
// The build for width `w`, switched as the dispatch macros switch.
void WhichAt(VectorWidth w, int* out) {
  switch (w) {
    case VectorWidth::kAvx512:
      WhichAvx512(out);
      break;
    case VectorWidth::kAvx2:
      WhichAvx2(out);
      break;
    default:
      WhichBase(out);
  }
}
void Which(int* out) { WhichAt(ActiveVectorWidth(), out); }

TANDEM_CPU_INLINE void AxpyBody(float* __restrict y, const float* __restrict x, int64_t n,
                                float a) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + a * x[i];
}
TANDEM_CPU_DISPATCHED(Axpy, (float* y, const float* x, int64_t n, float a), (y, x, n, a))

TEST(CpuDispatchTest, PicksTheWidestTheCpuRunsAndCanBeCappedAtEachNarrowerOne) {
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const VectorWidth widest =
      avx512 ? VectorWidth::kAvx512 : avx2 ? VectorWidth::kAvx2 : VectorWidth::kSse42;
  EXPECT_EQ(CpuVectorWidth(), widest);
  // By default at most AVX2 (cpu_dispatch.h says why).
  const VectorWidth by_default = std::min(widest, kDefaultVectorWidthCap);
  EXPECT_EQ(ActiveVectorWidth(), by_default);
  const std::vector<VectorWidth> all = SupportedVectorWidths();
  ASSERT_EQ(all.size(), static_cast<size_t>(widest) + 1);
  for (VectorWidth w : all) {
    ForceVectorWidth(w);
    EXPECT_EQ(ActiveVectorWidth(), w);
    Which(&g_ran);
    EXPECT_EQ(g_ran, static_cast<int>(w)) << VectorWidthName(w);
    EXPECT_EQ(CpuHasAvx2Fma(), w >= VectorWidth::kAvx2);
  }
  ForceBaselineVectorWidth(true);
  EXPECT_STREQ(VectorWidthName(), "sse4.2");
  ForceBaselineVectorWidth(false);
  EXPECT_EQ(ActiveVectorWidth(), by_default);
  ForceVectorWidth(VectorWidth::kAvx512);
  EXPECT_EQ(ActiveVectorWidth(), widest);
  ForceBaselineVectorWidth(false);
}

// Compute-bound loops run at the CPU's widest until a width is forced, then
// obey the cap like the rest; ForceBaselineVectorWidth(false) restores both.
int g_compute_ran = -1;
void ComputeWhich(int* out) { WhichAt(ActiveComputeVectorWidth(), out); }

TEST(CpuDispatchTest, ComputeBoundLoopsRunAtTheWidestUnlessAWidthIsForced) {
  ForceBaselineVectorWidth(false);
  EXPECT_EQ(ActiveComputeVectorWidth(), CpuVectorWidth());
  ComputeWhich(&g_compute_ran);
  EXPECT_EQ(g_compute_ran, static_cast<int>(CpuVectorWidth()));
  for (VectorWidth w : SupportedVectorWidths()) {
    ForceVectorWidth(w);
    EXPECT_EQ(ActiveComputeVectorWidth(), w) << VectorWidthName(w);
    ComputeWhich(&g_compute_ran);
    EXPECT_EQ(g_compute_ran, static_cast<int>(w)) << VectorWidthName(w);
  }
  ForceBaselineVectorWidth(true);
  EXPECT_EQ(ActiveComputeVectorWidth(), VectorWidth::kSse42);
  ForceBaselineVectorWidth(false);
  EXPECT_EQ(ActiveComputeVectorWidth(), CpuVectorWidth());
  EXPECT_EQ(ActiveVectorWidth(), std::min(CpuVectorWidth(), kDefaultVectorWidthCap));
}

// Every width the CPU runs (the baseline at least) against a plain loop:
// y + a * x with one rounding per operation (-ffp-contract=off), so every
// build must give these exact bits, whatever the host's widths.
TEST(CpuDispatchTest, EveryWidthComputesTheReferenceOnRaggedSizes) {
  const std::vector<VectorWidth> widths = SupportedVectorWidths();
  ASSERT_FALSE(widths.empty());
  for (int64_t n : {0, 1, 15, 16, 17, 63, 1001}) {
    std::vector<float> x(n), want(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = 0.25f * static_cast<float>(i % 13) - 1.f + 1e-3f * static_cast<float>(i);
      const volatile float product = 0.75f * x[i];  // rounded on its own
      want[i] = 2.f + product;
    }
    for (VectorWidth w : widths) {
      ForceVectorWidth(w);
      std::vector<float> y(n, 2.f);
      Axpy(y.data(), x.data(), n, 0.75f);
      EXPECT_EQ(y, want) << n << " at " << VectorWidthName(w);
    }
    ForceBaselineVectorWidth(false);
  }
}

}  // namespace
}  // namespace numeric
}  // namespace tandem
