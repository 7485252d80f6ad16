// The codecs' contracts: int8 round trip within scale/2 (nearest) and
// unbiased stochastic rounding; fp16 / bf16 bit-identical to
// common/numeric/precision; top-k keeps exactly the k largest magnitudes;
// threshold keeps what passes up to its capacity; the fused
// error-feedback encode equals encode-then-decode; decode-add adds; the
// wide and baseline vector builds give the same bytes; ragged sizes (0, 1,
// odd, not a multiple of the chunk) everywhere.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/codec/codec_factory.h"
#include "common/codec/int8_codec.h"
#include "common/codec/sparse_block.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/precision.h"
#include "gtest/gtest.h"

namespace tandem {
namespace codec {
namespace {

const std::vector<int64_t> kSizes = {0, 1, 2, 7, 255, 256, 257, 1000, 2049, 4097};

std::vector<float> Gaussian(int64_t n, uint32_t seed, float sigma = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::unique_ptr<Codec> Make(CodecConfig c) {
  auto codec = CreateCodec(c);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return std::move(*codec);
}

CodecConfig Named(const std::string& name) {
  CodecConfig c;
  c.codec = name;
  c.k = 0.05;
  c.density = 0.05;
  return c;
}

float ScaleOf(const std::vector<uint8_t>& block, int64_t chunk) {
  float s;
  std::memcpy(&s, block.data() + 4 * chunk, 4);
  return s;
}

TEST(Int8Codec, NearestRoundTripWithinHalfAScale) {
  for (int64_t chunk : {256, 1000, 2048}) {
    CodecConfig c;
    c.chunk = chunk;
    auto codec = Make(c);
    for (int64_t n : kSizes) {
      // Chunks of very different magnitudes, so each has its own scale.
      std::vector<float> x = Gaussian(n, 11 + n);
      for (int64_t i = 0; i < n; ++i) x[i] *= std::pow(10.f, static_cast<float>((i / chunk) % 5) - 2);
      const int64_t chunks = (n + chunk - 1) / chunk;
      ASSERT_EQ(codec->MaxEncodedBytes(n), 4 * chunks + n);
      std::vector<uint8_t> block(codec->MaxEncodedBytes(n) + 1, 0xAB);
      ASSERT_EQ(codec->Encode(x.data(), n, {}, block.data()), codec->MaxEncodedBytes(n));
      EXPECT_EQ(block.back(), 0xAB) << "wrote past MaxEncodedBytes";
      std::vector<float> y(n);
      codec->Decode(block.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ch = i / chunk;
        float max_abs = 0;
        for (int64_t j = ch * chunk; j < std::min(n, (ch + 1) * chunk); ++j) {
          max_abs = std::max(max_abs, std::fabs(x[j]));
        }
        const float scale = ScaleOf(block, ch);
        ASSERT_EQ(scale, max_abs / 127.f) << "chunk " << ch;
        // scale / 2, plus the fp32 rounding of x / scale and q * scale.
        ASSERT_LE(std::fabs(x[i] - y[i]), scale * 0.5f * (1 + 1e-5f) + 1e-30f)
            << "n " << n << " i " << i << " chunk " << chunk;
      }
    }
  }
}

TEST(Int8Codec, ZeroChunkAndNonFinite) {
  auto codec = Make(CodecConfig{});
  std::vector<float> x(300, 0.f);
  std::vector<uint8_t> block(codec->MaxEncodedBytes(300));
  codec->Encode(x.data(), 300, {}, block.data());
  std::vector<float> y(300, 1.f);
  codec->Decode(block.data(), 300, y.data());
  for (float v : y) EXPECT_EQ(v, 0.f);
  x[5] = std::numeric_limits<float>::infinity();
  codec->Encode(x.data(), 300, {}, block.data());
  codec->Decode(block.data(), 300, y.data());
  EXPECT_TRUE(std::isnan(y[5])) << "a non-finite gradient must stay visible";
  // Error feedback never keeps a non-finite residual.
  std::vector<float> r(300, 0.f);
  codec->EncodeWithFeedback(x.data(), r.data(), 300, {}, block.data());
  for (float v : r) EXPECT_TRUE(std::isfinite(v));
}

TEST(Int8Codec, StochasticRoundingIsUnbiasedAndSeeded) {
  CodecConfig c;
  c.rounding = "stochastic";
  c.chunk = 256;
  auto codec = Make(c);
  const int64_t n = 257;
  std::vector<float> x = Gaussian(n, 3);
  std::vector<uint8_t> a(codec->MaxEncodedBytes(n)), b(a.size());
  EncodeParams p;
  p.seed = 42;
  codec->Encode(x.data(), n, p, a.data());
  codec->Encode(x.data(), n, p, b.data());
  EXPECT_EQ(a, b) << "same seed, same bytes";
  p.seed = 43;
  codec->Encode(x.data(), n, p, b.data());
  EXPECT_NE(a, b);
  // The mean over many seeds converges on x (nearest would stay biased).
  std::vector<double> mean(n, 0.0);
  std::vector<float> y(n);
  const int kTrials = 4000;
  for (int t = 0; t < kTrials; ++t) {
    p.seed = 1000 + t;
    codec->Encode(x.data(), n, p, a.data());
    codec->Decode(a.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) {
      const float scale = ScaleOf(a, i / 256);
      ASSERT_LT(std::fabs(y[i] - x[i]), scale * (1 + 1e-5f)) << i;
      mean[i] += y[i] / kTrials;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const float scale = ScaleOf(a, i / 256);
    // Standard error of the mean <= scale / (2 sqrt(trials)) ~ scale / 126.
    EXPECT_NEAR(mean[i], x[i], scale * 0.05) << i;
  }
  for (int i = 0; i < 1000; ++i) {
    const float d = StochasticDither(7, i);
    ASSERT_GE(d, 0.f);
    ASSERT_LT(d, 1.f);
  }
}

TEST(HalfCodecs, BitIdenticalToPrecisionConversions) {
  auto fp16 = Make(Named("fp16"));
  auto bf16 = Make(Named("bf16"));
  std::mt19937 rng(5);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (float f : {0.f, -0.f, 1e-8f, 6e-8f, 65504.f, 65519.f, 65520.f, -1e6f, 1e-40f, 3.0f,
                  std::numeric_limits<float>::infinity()}) {
    x.push_back(f);
  }
  const int64_t n = x.size();
  std::vector<uint8_t> block(2 * n);
  fp16->Encode(x.data(), n, {}, block.data());
  std::vector<uint16_t> h(n);
  std::memcpy(h.data(), block.data(), 2 * n);
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      ASSERT_EQ(h[i] & 0x7C00u, 0x7C00u);
      ASSERT_NE(h[i] & 0x3FFu, 0u);
      continue;
    }
    // Saturated, then converted exactly as precision.h does.
    const float sat = std::isinf(x[i]) ? x[i] : std::min(std::max(x[i], -65504.f), 65504.f);
    ASSERT_EQ(h[i], numeric::FloatToHalf(sat)) << x[i];
  }
  std::vector<float> y(n);
  fp16->Decode(block.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(x[i])) {
      ASSERT_EQ(y[i], numeric::HalfToFloat(h[i]));
    }
  }
  bf16->Encode(x.data(), n, {}, block.data());
  std::memcpy(h.data(), block.data(), 2 * n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(h[i], numeric::FloatToBf16(x[i])) << x[i];
}

// Indices and values of a sparse block.
std::vector<std::pair<uint32_t, float>> Pairs(const std::vector<uint8_t>& block) {
  std::vector<std::pair<uint32_t, float>> out;
  if (block.empty()) return out;
  const sparse::Header h = sparse::ReadHeader(block.data());
  for (int64_t j = 0; j < h.count; ++j) {
    uint32_t i;
    float v;
    std::memcpy(&i, block.data() + 8 + 8 * j, 4);
    std::memcpy(&v, block.data() + 12 + 8 * j, 4);
    out.push_back({i, v});
  }
  return out;
}

TEST(TopkCodec, KeepsExactlyTheKLargestMagnitudes) {
  for (double k : {0.001, 0.01, 0.1, 0.5, 1.0}) {
    CodecConfig c = Named("topk");
    c.k = k;
    auto codec = Make(c);
    for (int64_t n : kSizes) {
      std::vector<float> x = Gaussian(n, 17 + n);
      // Ties at the boundary: repeat some magnitudes with both signs.
      for (int64_t i = 0; i + 10 < n; i += 10) x[i + 5] = -x[i];
      const int64_t keep = sparse::KeepCount(k, n);
      ASSERT_EQ(keep, n == 0 ? 0 : std::max<int64_t>(1, std::ceil(k * n)));
      std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
      std::vector<float> ws(codec->WorkspaceFloats(n));
      EncodeParams p;
      p.workspace = ws.data();
      const int64_t bytes = codec->Encode(x.data(), n, p, block.data());
      ASSERT_LE(bytes, codec->MaxEncodedBytes(n));
      const auto pairs = Pairs(block);
      ASSERT_EQ(static_cast<int64_t>(pairs.size()), keep) << "n " << n << " k " << k;
      // The kept magnitudes are the top `keep` of the sorted magnitudes.
      std::vector<float> all(n), kept;
      for (int64_t i = 0; i < n; ++i) all[i] = std::fabs(x[i]);
      std::sort(all.begin(), all.end(), std::greater<float>());
      std::vector<char> seen(n, 0);
      for (auto [i, v] : pairs) {
        ASSERT_LT(i, static_cast<uint32_t>(n));
        ASSERT_FALSE(seen[i]) << "index twice";
        seen[i] = 1;
        ASSERT_EQ(v, x[i]) << "values are sent exactly";
        kept.push_back(std::fabs(v));
      }
      std::sort(kept.begin(), kept.end(), std::greater<float>());
      for (int64_t j = 0; j < keep; ++j) ASSERT_EQ(kept[j], all[j]) << j;
      for (size_t j = 1; j < pairs.size(); ++j) ASSERT_LT(pairs[j - 1].first, pairs[j].first);
      // Decode: the kept values in place, zeros elsewhere.
      std::vector<float> y(n, 9.f);
      codec->Decode(block.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], seen[i] ? x[i] : 0.f);
    }
  }
}

TEST(TopkCodec, EqualMagnitudesGoToTheLowestIndices) {
  CodecConfig c = Named("topk");
  c.k = 0.3;
  auto codec = Make(c);
  const int64_t n = 1001;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = i % 2 ? 1.5f : -1.5f;
  x[700] = 2.f;  // one larger value, kept first
  x[3] = std::numeric_limits<float>::quiet_NaN();  // NaN counts as the largest
  std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
  std::vector<float> ws(codec->WorkspaceFloats(n));
  EncodeParams p;
  p.workspace = ws.data();
  codec->Encode(x.data(), n, p, block.data());
  const auto pairs = Pairs(block);
  const int64_t k = sparse::KeepCount(0.3, n);
  ASSERT_EQ(static_cast<int64_t>(pairs.size()), k);
  // NaN at 3 and 2.0 at 700, then the lowest k - 2 indices of the rest.
  std::vector<uint32_t> expect;
  for (uint32_t i = 0; static_cast<int64_t>(expect.size()) < k - 1; ++i) {
    if (i != 700) expect.push_back(i);
  }
  expect.push_back(700);
  std::sort(expect.begin(), expect.end());
  std::vector<uint32_t> got;
  for (auto [i, v] : pairs) got.push_back(i);
  EXPECT_EQ(got, expect);
  EXPECT_TRUE(std::isnan(pairs[3].second));
}

TEST(ThresholdCodec, KeepsWhatPassesUpToCapacity) {
  CodecConfig c = Named("threshold");
  c.density = 0.05;
  c.max_density = 0.1;
  auto codec = Make(c);
  const int64_t n = 2049;
  std::vector<float> x = Gaussian(n, 23);
  std::vector<float> ws(codec->WorkspaceFloats(n));
  std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
  ASSERT_EQ(codec->MaxEncodedBytes(n), 8 + 8 * sparse::KeepCount(0.1, n));
  EncodeParams p;
  p.workspace = ws.data();
  // A threshold passing ~4.6% (|z| >= 2): all of them.
  p.threshold = 2.0f;
  codec->Encode(x.data(), n, p, block.data());
  int64_t passing = 0;
  for (float v : x) passing += std::fabs(v) >= 2.0f;
  ASSERT_LE(passing, sparse::KeepCount(0.1, n));
  auto pairs = Pairs(block);
  EXPECT_EQ(static_cast<int64_t>(pairs.size()), passing);
  for (auto [i, v] : pairs) EXPECT_GE(std::fabs(v), 2.0f);
  // A threshold passing ~32%: capped at capacity, the largest ones.
  p.threshold = 1.0f;
  codec->Encode(x.data(), n, p, block.data());
  pairs = Pairs(block);
  EXPECT_EQ(static_cast<int64_t>(pairs.size()), sparse::KeepCount(0.1, n));
  // No threshold yet: the target density of largest; min_kept reported.
  p.threshold = 0;
  codec->Encode(x.data(), n, p, block.data());
  pairs = Pairs(block);
  EXPECT_EQ(static_cast<int64_t>(pairs.size()), sparse::KeepCount(0.05, n));
  float smallest = std::numeric_limits<float>::infinity();
  for (auto [i, v] : pairs) smallest = std::min(smallest, std::fabs(v));
  EXPECT_EQ(sparse::ReadHeader(block.data()).min_kept, smallest);
}

// For every codec and size: the fused EncodeWithFeedback gives the same
// bytes as Encode(x + r) and leaves r = (x + r) - Decode; DecodeAdd adds.
TEST(AllCodecs, FusedFeedbackEqualsEncodeThenDecode) {
  for (const char* name : {"int8", "fp16", "bf16", "topk", "threshold"}) {
    CodecConfig c = Named(name);
    c.chunk = 256;
    auto codec = Make(c);
    for (int64_t n : kSizes) {
      const std::vector<float> x = Gaussian(n, 31 + n);
      std::vector<float> r = Gaussian(n, 37 + n, 0.1f);
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = x[i] + r[i];
      std::vector<float> ws(codec->WorkspaceFloats(n));
      EncodeParams p;
      p.workspace = ws.data();
      p.threshold = 1.5f;
      const int64_t max = codec->MaxEncodedBytes(n);
      std::vector<uint8_t> fused(max), plain(max);
      const int64_t fb = codec->EncodeWithFeedback(x.data(), r.data(), n, p, fused.data());
      const int64_t pb = codec->Encode(v.data(), n, p, plain.data());
      ASSERT_EQ(fb, pb) << name << " n " << n;
      ASSERT_LE(fb, max);
      ASSERT_TRUE(std::equal(fused.begin(), fused.begin() + fb, plain.begin())) << name << n;
      std::vector<float> d(n);
      codec->Decode(plain.data(), n, d.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(r[i], v[i] - d[i]) << name << " " << i;
      std::vector<float> acc(n, 0.5f);
      codec->DecodeAdd(plain.data(), n, acc.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], 0.5f + d[i]) << name << " " << i;
    }
  }
}

TEST(AllCodecs, BaselineAndWideBuildsGiveTheSameBytes) {
  for (const char* name : {"int8", "fp16", "bf16"}) {
    CodecConfig c = Named(name);
    c.rounding = "stochastic";
    auto codec = Make(c);
    const int64_t n = 4097;
    const std::vector<float> x = Gaussian(n, 41);
    std::vector<uint8_t> wide(codec->MaxEncodedBytes(n)), base(wide.size());
    EncodeParams p;
    p.seed = 9;
    codec->Encode(x.data(), n, p, wide.data());
    numeric::ForceBaselineVectorWidth(true);
    codec->Encode(x.data(), n, p, base.data());
    std::vector<float> yb(n), yw(n);
    codec->Decode(base.data(), n, yb.data());
    numeric::ForceBaselineVectorWidth(false);
    codec->Decode(wide.data(), n, yw.data());
    EXPECT_EQ(wide, base) << name;
    EXPECT_EQ(yw, yb) << name;
  }
}

TEST(CodecFactory, BadOptionsNameTheKey) {
  CodecConfig c;
  c.codec = "int4";
  EXPECT_NE(CreateCodec(c).status().message().find("int8|fp16|bf16|topk|threshold"),
            std::string::npos);
  c = CodecConfig{};
  c.chunk = 100;
  EXPECT_NE(CreateCodec(c).status().message().find("chunk"), std::string::npos);
  c = CodecConfig{};
  c.rounding = "up";
  EXPECT_NE(CreateCodec(c).status().message().find("rounding"), std::string::npos);
  c = Named("topk");
  c.k = 0;
  EXPECT_NE(CreateCodec(c).status().message().find("k (fraction"), std::string::npos);
  c = Named("threshold");
  c.density = 1.5;
  EXPECT_NE(CreateCodec(c).status().message().find("density"), std::string::npos);
  c = Named("threshold");
  c.max_density = 0.01;  // below density 0.05
  EXPECT_NE(CreateCodec(c).status().message().find("max_density"), std::string::npos);
}

}  // namespace
}  // namespace codec
}  // namespace tandem
