#include "common/data/dataset_inputs.h"

#include "absl/strings/match.h"
#include "common/data/dataset_info_testutil.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

const v1::DatasetInfo kImages = FashionMnistInfo();
const v1::DatasetInfo kText = FortunesInfo();

TEST(DatasetInputsTest, ImagesAreDenseAndNormalized) {
  auto in = ClassifyDataset(kImages);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, InputKind::kDense);
  EXPECT_EQ(in->sample_elements, 784);
  EXPECT_EQ(in->num_classes, 10);
  EXPECT_TRUE(in->normalize_to_f32);
  auto f32 = ClassifyDataset(TestDatasetInfo("f", v1::DTYPE_F32, {20}, v1::DTYPE_I32, {}, 5));
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->kind, InputKind::kDense);
  EXPECT_FALSE(f32->normalize_to_f32);  // the server refuses normalize on f32
}

TEST(DatasetInputsTest, TokenWindowsAreTokensAndNeverNormalized) {
  auto in = ClassifyDataset(kText);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, InputKind::kTokens);
  EXPECT_EQ(in->context, 128);
  EXPECT_EQ(in->num_classes, 256);
  EXPECT_FALSE(in->normalize_to_f32);
}

TEST(DatasetInputsTest, OtherLayoutsAreRejectedWithTheirSpecs) {
  for (const v1::DatasetInfo& bad : {
           TestDatasetInfo("a", v1::DTYPE_I32, {16}, v1::DTYPE_I32, {8}, 256),   // ctx mismatch
           TestDatasetInfo("b", v1::DTYPE_U8, {16}, v1::DTYPE_I32, {16}, 256),   // u8 with token labels
           TestDatasetInfo("c", v1::DTYPE_I32, {4, 4}, v1::DTYPE_I32, {4, 4}, 256),
           TestDatasetInfo("d", v1::DTYPE_F16, {16}, v1::DTYPE_I32, {}, 10),
           TestDatasetInfo("e", v1::DTYPE_U8, {16}, v1::DTYPE_I64, {}, 10),
           TestDatasetInfo("f", v1::DTYPE_I32, {16}, v1::DTYPE_I32, {16}, 0),   // no vocab
           TestDatasetInfo("g", v1::DTYPE_U8, {16}, v1::DTYPE_I32, {}, 0),      // no classes
       }) {
    auto in = ClassifyDataset(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(in.status())) << bad.name() << ": " << in.status();
    EXPECT_TRUE(absl::StrContains(in.status().message(), "dataset " + bad.name()))
        << in.status();
  }
  auto c = ClassifyDataset(TestDatasetInfo("c", v1::DTYPE_I32, {4, 4}, v1::DTYPE_I32, {4, 4}, 256));
  EXPECT_TRUE(absl::StrContains(c.status().message(), "i32 [4,4]")) << c.status();
}

TEST(DatasetInputsTest, TypedDenseSamplesCarryTheirDescription) {
  for (v1::DType t : {v1::DTYPE_F32, v1::DTYPE_U8, v1::DTYPE_I32, v1::DTYPE_I64}) {
    auto in = ClassifyDataset(TestDatasetInfo("n", t, {1, 28, 28}, v1::DTYPE_I32, {}, 10));
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(in->kind, InputKind::kDense);
    EXPECT_EQ(in->feature_dtype, t);
    EXPECT_EQ(in->sample_shape, (std::vector<int64_t>{1, 28, 28}));
    EXPECT_TRUE(in->label_shape.empty());
    EXPECT_EQ(in->sample_elements, 784);
    EXPECT_EQ(in->normalize_to_f32, t == v1::DTYPE_U8);
  }
  auto text = ClassifyDataset(kText);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->label_shape, (std::vector<int64_t>{128}));
  auto deep = ClassifyDataset(TestDatasetInfo("deep", v1::DTYPE_F32, {1, 1, 1, 1, 1, 1, 1, 2},
                                   v1::DTYPE_I32, {}, 2));
  EXPECT_TRUE(absl::IsInvalidArgument(deep.status())) << deep.status();
  EXPECT_TRUE(absl::StrContains(deep.status().message(), "at most 7 dimensions"))
      << deep.status();
}

}  // namespace
}  // namespace data
}  // namespace tandem
