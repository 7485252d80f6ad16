#include "common/nn/dataset_fit.h"

#include "absl/strings/match.h"
#include "common/data/dataset_info_testutil.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

const v1::DatasetInfo kImages = data::FashionMnistInfo();
const v1::DatasetInfo kText = data::FortunesInfo();

ModelSpec Spec(const std::string& s) {
  auto spec = ParseModelSpec(s);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(DatasetFitTest, ModelMustFitTheDataset) {
  const data::DatasetInputs images = *data::ClassifyDataset(kImages);
  const data::DatasetInputs text = *data::ClassifyDataset(kText);
  EXPECT_TRUE(CheckModelFitsDataset(Spec("mlp:784,64,10"), images).ok());
  EXPECT_TRUE(CheckModelFitsDataset(
                  Spec("gpt:layers=4,heads=4,width=256,context=128,vocab=256"), text)
                  .ok());
  EXPECT_TRUE(CheckModelFitsDataset(
                  Spec("gpt:layers=1,heads=1,width=8,context=128,vocab=300"), text)
                  .ok());  // a larger vocab is fine

  auto expect_bad = [](const absl::Status& s, const std::string& needle) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), needle)) << s;
  };
  expect_bad(CheckModelFitsDataset(Spec("mlp:100,10"), images), "use mlp:784,...,10");
  expect_bad(CheckModelFitsDataset(Spec("mlp:784,7"), images), "gives 7 classes");
  expect_bad(CheckModelFitsDataset(Spec("mlp:128,256"), text), "context=128,vocab=256");
  expect_bad(CheckModelFitsDataset(Spec("gpt:layers=1,heads=1,width=8,context=64,vocab=256"),
                                   text),
             "use context=128");
  expect_bad(CheckModelFitsDataset(Spec("gpt:layers=1,heads=1,width=8,context=128,vocab=100"),
                                   text),
             "vocab >= 256");
  expect_bad(CheckModelFitsDataset(Spec("gpt:layers=1,heads=1,width=8,context=128,vocab=256"),
                                   images),
             "is a GPT");
}

TEST(DatasetFitTest, MlpRefusesIntegerFeaturesByName) {
  const data::DatasetInputs ints = *data::ClassifyDataset(
      data::TestDatasetInfo("ints", v1::DTYPE_I64, {3, 5}, v1::DTYPE_I32, {}, 4));
  const absl::Status s = CheckModelFitsDataset(Spec("mlp:15,4"), ints);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "takes float32 or uint8 features")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "i64 [3,5]")) << s;
  const data::DatasetInputs floats = *data::ClassifyDataset(
      data::TestDatasetInfo("floats", v1::DTYPE_F32, {3, 5}, v1::DTYPE_I32, {}, 4));
  EXPECT_TRUE(CheckModelFitsDataset(Spec("mlp:15,4"), floats).ok());
}

}  // namespace
}  // namespace nn
}  // namespace tandem
