// RecommendedOpenblasCoretype over feature sets and core names (pure), and
// the detection functions' consistency on the machine running the test.
#include "common/kernels/blas_core.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

CpuFeatures Avx2Cpu() {
  CpuFeatures f;
  f.avx = f.avx2 = f.fma = f.os_avx = true;
  return f;
}

CpuFeatures Avx512Cpu() {
  CpuFeatures f = Avx2Cpu();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = true;
  f.os_avx512 = true;
  return f;
}

TEST(BlasCoreTest, Avx2CpuKeepsAnAvx2Core) {
  // This repo's development machine: Zen 3, AVX2 + FMA, OpenBLAS says "Zen".
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx2Cpu(), "Zen"), "");
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx2Cpu(), "Haswell"), "");
}

TEST(BlasCoreTest, Avx2CpuOnAnOldCoreGetsHaswell) {
  for (const char* old : {"Sandybridge", "Nehalem", "Prescott", "Core2", "Barcelona",
                          "Bulldozer", "Excavator", "Unknown", "SANDYBRIDGE"}) {
    EXPECT_EQ(RecommendedOpenblasCoretype(Avx2Cpu(), old), "Haswell") << old;
  }
}

TEST(BlasCoreTest, Avx512CpuOnAnAvx2CoreGetsSkylakeX) {
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), "Zen"), "SkylakeX");
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), "haswell"), "SkylakeX");
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), "Sandybridge"), "SkylakeX");
  CpuFeatures bf16 = Avx512Cpu();
  bf16.avx512_bf16 = true;
  EXPECT_EQ(RecommendedOpenblasCoretype(bf16, "Zen"), "SkylakeX");
}

TEST(BlasCoreTest, Avx512CoresAreNeverReplaced) {
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), c), "") << c;
    EXPECT_EQ(RecommendedOpenblasCoretype(Avx2Cpu(), c), "") << c;
  }
}

TEST(BlasCoreTest, NeverNamesACoreTheCpuCannotRun) {
  // AVX-512 in cpuid but not enabled by the OS (XCR0), or missing BW/VL
  // (Knights Landing style): no SkylakeX, which would die with SIGILL.
  CpuFeatures no_os = Avx512Cpu();
  no_os.os_avx512 = false;
  EXPECT_EQ(RecommendedOpenblasCoretype(no_os, "Zen"), "");
  EXPECT_EQ(RecommendedOpenblasCoretype(no_os, "Sandybridge"), "Haswell");
  CpuFeatures no_bw = Avx512Cpu();
  no_bw.avx512bw = false;
  EXPECT_EQ(RecommendedOpenblasCoretype(no_bw, "Haswell"), "");
  // AVX without AVX2 / FMA, or AVX2 the OS does not save: no Haswell.
  CpuFeatures avx_only;
  avx_only.avx = avx_only.os_avx = true;
  EXPECT_EQ(RecommendedOpenblasCoretype(avx_only, "Sandybridge"), "");
  CpuFeatures no_fma = Avx2Cpu();
  no_fma.fma = false;
  EXPECT_EQ(RecommendedOpenblasCoretype(no_fma, "Nehalem"), "");
  CpuFeatures no_os_avx = Avx2Cpu();
  no_os_avx.os_avx = false;
  EXPECT_EQ(RecommendedOpenblasCoretype(no_os_avx, "Nehalem"), "");
  EXPECT_EQ(RecommendedOpenblasCoretype(CpuFeatures(), "Prescott"), "");
}

TEST(BlasCoreTest, UnknownOrEmptyNamesAreLeftAlone) {
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), ""), "");
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx2Cpu(), "NeoverseN1"), "");
  EXPECT_EQ(RecommendedOpenblasCoretype(Avx512Cpu(), "POWER9"), "");
}

TEST(BlasCoreTest, ChildrenGetTheRecommendationUnlessTheUserSetOne) {
  EXPECT_EQ(OpenblasCoretypeForChildren(nullptr, Avx2Cpu(), "Sandybridge"),
            "OPENBLAS_CORETYPE=Haswell");
  EXPECT_EQ(OpenblasCoretypeForChildren(nullptr, Avx512Cpu(), "Zen"), "OPENBLAS_CORETYPE=SkylakeX");
  EXPECT_EQ(OpenblasCoretypeForChildren(nullptr, Avx2Cpu(), "Zen"), "");
  // A value the user or the environment set is never changed, even a weak
  // or an empty one.
  EXPECT_EQ(OpenblasCoretypeForChildren("Prescott", Avx512Cpu(), "Prescott"), "");
  EXPECT_EQ(OpenblasCoretypeForChildren("", Avx2Cpu(), "Sandybridge"), "");
}

TEST(BlasCoreTest, DetectionIsConsistentHere) {
  const CpuFeatures f = DetectCpuFeatures();
  // Implications that hold on every x86 CPU.
  if (f.avx512bw || f.avx512vl || f.avx512dq || f.avx512cd) EXPECT_TRUE(f.avx512f);
  if (f.os_avx512) EXPECT_TRUE(f.os_avx);
  if (HasUsableAvx512(f)) EXPECT_TRUE(HasUsableAvx2(f));
  // Whatever OpenBLAS chose, the recommendation never asks for AVX-512
  // kernels on a CPU (and OS) without them.
  const std::string core = OpenblasCoreName();
  const std::string rec = RecommendedOpenblasCoretype(f, core);
  if (rec == "SkylakeX") EXPECT_TRUE(HasUsableAvx512(f));
  if (rec == "Haswell") EXPECT_TRUE(HasUsableAvx2(f));
  EXPECT_NE(OpenblasConfig().find("OpenBLAS"), std::string::npos) << OpenblasConfig();
  std::printf("cpu: avx2=%d fma=%d avx512f=%d bw=%d vl=%d os_avx512=%d; OpenBLAS core %s; "
              "recommended \"%s\"\n",
              f.avx2, f.fma, f.avx512f, f.avx512bw, f.avx512vl, f.os_avx512, core.c_str(),
              rec.c_str());
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
