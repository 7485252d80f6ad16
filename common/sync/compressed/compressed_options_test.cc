// ParseCompressedOptions: a named codec alone resolves to its accurate
// configuration (topk / threshold: warm-up 200, momentum correction
// without masking; powersgd: rank 4, warm-up 10), explicit keys override
// each default, and the header line says what was chosen and which values
// were defaults.
#include "common/sync/compressed/compressed_options.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

ParsedCompressed Parse(const std::string& opts) {
  absl::StatusOr<SyncOptions> so = ParseSyncOptions("compressed", opts);
  EXPECT_TRUE(so.ok()) << so.status();
  absl::StatusOr<ParsedCompressed> p = ParseCompressedOptions(*so);
  EXPECT_TRUE(p.ok()) << opts << ": " << p.status();
  return p.ok() ? std::move(*p) : ParsedCompressed{};
}

TEST(CompressedOptions, TopkAloneGetsItsAccurateConfiguration) {
  for (const std::string codec : {"topk", "threshold"}) {
    const ParsedCompressed p = Parse("codec=" + codec);
    EXPECT_TRUE(p.options.error_feedback) << codec;
    EXPECT_EQ(p.options.warmup_steps, 200) << codec;
    EXPECT_TRUE(p.options.momentum_correction) << codec;
    EXPECT_FALSE(p.options.momentum_masking) << codec;
    EXPECT_TRUE(p.default_momentum_correction) << codec;
    const std::string h = p.Header();
    EXPECT_TRUE(absl::StrContains(h, "compressed: codec=" + codec)) << h;
    EXPECT_TRUE(absl::StrContains(h, "warmup_steps=200 momentum_correction=1 masking=0")) << h;
    EXPECT_TRUE(absl::StrContains(h, "(defaults for " + codec)) << h;
  }
  EXPECT_EQ(Parse("codec=topk").options.codec.k, 0.01);
}

TEST(CompressedOptions, ExplicitKeysOverrideEachDefault) {
  ParsedCompressed p = Parse("codec=topk,warmup_steps=0");
  EXPECT_EQ(p.options.warmup_steps, 0);
  EXPECT_TRUE(p.options.momentum_correction) << "the other defaults stay";
  p = Parse("codec=topk,momentum_correction=0");
  EXPECT_FALSE(p.options.momentum_correction);
  EXPECT_FALSE(p.default_momentum_correction);
  EXPECT_EQ(p.options.warmup_steps, 200);
  p = Parse("codec=topk,masking=1,k=0.05");
  EXPECT_TRUE(p.options.momentum_masking);
  EXPECT_EQ(p.options.codec.k, 0.05);
  p = Parse("codec=topk,ef=0");
  EXPECT_FALSE(p.options.momentum_correction) << "no correction without error feedback";
  // Every key given: nothing is a default, and the header says none.
  p = Parse("codec=topk,k=0.02,ef=1,warmup_steps=5,momentum_correction=1,masking=1");
  EXPECT_TRUE(p.defaulted.empty());
  EXPECT_FALSE(absl::StrContains(p.Header(), "defaults for")) << p.Header();
}

TEST(CompressedOptions, OtherCodecsKeepTheirDefaults) {
  ParsedCompressed p = Parse("");
  EXPECT_EQ(p.options.codec.codec, "int8");
  EXPECT_EQ(p.options.warmup_steps, 0);
  EXPECT_FALSE(p.options.momentum_correction);
  p = Parse("codec=powersgd");
  EXPECT_TRUE(p.powersgd());
  EXPECT_EQ(p.rank, 4);
  EXPECT_EQ(p.options.warmup_steps, 10);
  EXPECT_EQ(p.min_compression, 2);
  EXPECT_FALSE(p.compress_embeddings);
  EXPECT_TRUE(absl::StrContains(p.Header(), "codec=powersgd rank=4 min_compression=2 "
                                            "embeddings=0 ef=1 warmup_steps=10 (defaults for "
                                            "powersgd: rank, min_compression, embeddings"))
      << p.Header();
  EXPECT_EQ(Parse("codec=powersgd,rank=8,warmup_steps=0").rank, 8);
  p = Parse("codec=powersgd,embeddings=1");
  EXPECT_TRUE(p.compress_embeddings);
  EXPECT_TRUE(absl::StrContains(p.Header(), "embeddings=1")) << p.Header();
}

TEST(CompressedOptions, EmbeddingsKeyIsPowerSgdsAndABoolean) {
  for (const std::string opts : {"codec=int8,embeddings=1", "codec=powersgd,embeddings=2"}) {
    absl::StatusOr<SyncOptions> so = ParseSyncOptions("compressed", opts);
    ASSERT_TRUE(so.ok()) << so.status();
    const absl::StatusOr<ParsedCompressed> p = ParseCompressedOptions(*so);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << opts;
    EXPECT_TRUE(absl::StrContains(p.status().message(), "embeddings")) << p.status();
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
