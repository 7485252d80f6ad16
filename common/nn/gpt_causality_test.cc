// GptModel is causal across the blocked attention's blocks: changing the
// token at position p leaves the predictions of every earlier position
// bit-identical and changes those from p on, for positions in the first,
// a middle and the last (partial) causal block and at block edges. A leak
// of the future (a block reading scores above the diagonal) would make the
// model learn faster than a causal one and look better on held-out text.
// Width 8 (head size 4) runs the attention GEMMs on OpenBLAS, width 32
// (head size 16) on the CPU backend's own causal kernel where the CPU has
// AVX-512 (cpu_causal_gemm.cc: 6-row tiles, 64-column panels).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/nn/attention.h"
#include "common/nn/model.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

constexpr int kContext = 2 * kCausalBlock + 5;  // three blocks, the last partial
constexpr int kVocab = 11;

std::vector<float> Probs(Model& m, const std::vector<int32_t>& tokens,
                         const std::vector<int32_t>& labels) {
  Batch b;
  b.size = 2;
  b.tokens = tokens.data();
  b.labels = labels.data();
  EXPECT_TRUE(m.Forward(b).ok());
  const size_t n = static_cast<size_t>(b.size) * kContext * kVocab;
  return std::vector<float>(m.probs(), m.probs() + n);
}

class GptCausalityTest : public testing::TestWithParam<int> {};

TEST_P(GptCausalityTest, EarlierPositionsDoNotSeeLaterTokens) {
  kernels::CpuBackend be;
  ModelOptions o;
  o.max_batch = 2;
  o.seed = 5;
  auto m = CreateModel("gpt:layers=2,heads=2,width=" + std::to_string(GetParam()) +
                           ",context=" + std::to_string(kContext) +
                           ",vocab=" + std::to_string(kVocab),
                       &be, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(2 * kContext), labels(2 * kContext);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % kVocab);
  for (int32_t& t : labels) t = static_cast<int32_t>(rng() % kVocab);
  const std::vector<float> base = Probs(**m, tokens, labels);
  for (int p : {0, 1, 5, 6, kCausalBlock - 1, kCausalBlock, kCausalBlock + 7, 2 * kCausalBlock,
                kContext - 1}) {
    SCOPED_TRACE(testing::Message() << "position " << p);
    std::vector<int32_t> changed = tokens;
    changed[kContext + p] = (changed[kContext + p] + 1) % kVocab;  // sequence 1 only
    const std::vector<float> after = Probs(**m, changed, labels);
    const size_t row = kVocab * sizeof(float);
    // Sequence 0 is untouched everywhere; sequence 1 before p too.
    ASSERT_EQ(0, std::memcmp(base.data(), after.data(), kContext * row));
    ASSERT_EQ(0, std::memcmp(base.data() + kContext * kVocab, after.data() + kContext * kVocab,
                             p * row));
    // From p on the predictions move (the changed token is an input there).
    EXPECT_NE(0, std::memcmp(base.data() + (kContext + p) * kVocab,
                             after.data() + (kContext + p) * kVocab, row));
  }
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, GptCausalityTest, testing::Values(8, 32));

}  // namespace
}  // namespace nn
}  // namespace tandem
