#include "common/nn/model_spec.h"

#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

TEST(ModelSpecTest, ParsesMlp) {
  absl::StatusOr<ModelSpec> s = ParseModelSpec("mlp:784,1024,1024,10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, ModelSpec::Kind::kMlp);
  EXPECT_EQ(s->mlp.widths, (std::vector<int>{784, 1024, 1024, 10}));
  EXPECT_EQ(s->ToString(), "mlp:784,1024,1024,10");
}

TEST(ModelSpecTest, ParsesTorchScriptPath) {
  absl::StatusOr<ModelSpec> s = ParseModelSpec("torchscript:/models/cnn,v2.pt");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, ModelSpec::Kind::kTorchScript);
  EXPECT_EQ(s->torchscript.path, "/models/cnn,v2.pt");
  EXPECT_EQ(s->ToString(), "torchscript:/models/cnn,v2.pt");
  absl::StatusOr<ModelSpec> empty = ParseModelSpec("torchscript:");
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(std::string(empty.status().message()).find("needs the path"), std::string::npos);
}

TEST(ModelSpecTest, ParsesGptInAnyKeyOrder) {
  absl::StatusOr<ModelSpec> s =
      ParseModelSpec("gpt:vocab=256,layers=2,heads=4,width=64,context=32");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, ModelSpec::Kind::kGpt);
  EXPECT_EQ(s->gpt.layers, 2);
  EXPECT_EQ(s->gpt.heads, 4);
  EXPECT_EQ(s->gpt.width, 64);
  EXPECT_EQ(s->gpt.context, 32);
  EXPECT_EQ(s->gpt.vocab, 256);
  EXPECT_EQ(ParseModelSpec(s->ToString())->ToString(), s->ToString());
}

TEST(ModelSpecTest, GptShortKeysAndByteVocabulary) {
  absl::StatusOr<ModelSpec> s = ParseModelSpec("gpt:layers=4,d=256,heads=4,ctx=128");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->gpt.width, 256);
  EXPECT_EQ(s->gpt.context, 128);
  EXPECT_EQ(s->gpt.vocab, 256);
  EXPECT_EQ(s->ToString(), "gpt:layers=4,heads=4,width=256,context=128,vocab=256");
}

TEST(ModelSpecTest, RejectsMalformedSpecsWithReasons) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "unknown model kind"},
      {"cnn:1,2", "unknown model kind"},
      {"mlp:", "not an integer"},
      {"mlp:784", "at least"},
      {"mlp:784,,10", "not an integer"},
      {"mlp:784,-5,10", "not an integer"},
      {"mlp:784,abc,10", "not an integer"},
      {"mlp:784,99999999999,10", "not an integer"},
      {"gpt:layers=2,width=64,context=32", "missing key \"heads\""},
      {"gpt:layers=2,heads=4,width=64,d=64,context=32", "twice"},
      {"gpt:layers=2,heads=3,width=64,context=32,vocab=9", "multiple of heads"},
      {"gpt:layers=2,heads=4,width=64,context=32,vocab=9,depth=3", "unknown key"},
      {"gpt:layers=2,layers=3,heads=4,width=64,context=32,vocab=9", "twice"},
      {"gpt:layers=0,heads=4,width=64,context=32,vocab=9", "not an integer"},
      {"gpt:layers,heads=4,width=64,context=32,vocab=9", "not an integer"},
  };
  for (const auto& [spec, why] : cases) {
    absl::StatusOr<ModelSpec> s = ParseModelSpec(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(s.status().message().find(why), std::string::npos)
        << spec << " -> " << s.status();
  }
}

}  // namespace
}  // namespace nn
}  // namespace tandem
