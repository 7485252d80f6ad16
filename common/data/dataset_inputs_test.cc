#include "common/data/dataset_inputs.h"

#include "absl/strings/match.h"
#include "common/rpc/server.h"
#include "gtest/gtest.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace data {
namespace {

v1::DatasetInfo Info(const std::string& name, v1::DType fdtype, std::vector<int64_t> fshape,
                     v1::DType ldtype, std::vector<int64_t> lshape, int classes) {
  v1::DatasetInfo info;
  info.set_name(name);
  info.set_num_samples(100);
  info.mutable_feature_spec()->set_dtype(fdtype);
  for (int64_t d : fshape) info.mutable_feature_spec()->add_shape(d);
  info.mutable_label_spec()->set_dtype(ldtype);
  for (int64_t d : lshape) info.mutable_label_spec()->add_shape(d);
  info.set_num_classes(classes);
  return info;
}

const v1::DatasetInfo kImages =  // what the server reports for fashion-mnist
    Info("fashion-mnist/train", v1::DTYPE_U8, {28, 28}, v1::DTYPE_I32, {}, 10);
const v1::DatasetInfo kText =  // what tools/convert --mode=text writes
    Info("fortunes/train", v1::DTYPE_I32, {128}, v1::DTYPE_I32, {128}, 256);

nn::ModelSpec Spec(const std::string& s) {
  auto spec = nn::ParseModelSpec(s);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(DatasetInputsTest, ImagesAreDenseAndNormalized) {
  auto in = ClassifyDataset(kImages);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, InputKind::kDense);
  EXPECT_EQ(in->sample_elements, 784);
  EXPECT_EQ(in->num_classes, 10);
  EXPECT_TRUE(in->normalize_to_f32);
  auto f32 = ClassifyDataset(Info("f", v1::DTYPE_F32, {20}, v1::DTYPE_I32, {}, 5));
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
           Info("a", v1::DTYPE_I32, {16}, v1::DTYPE_I32, {8}, 256),   // ctx mismatch
           Info("b", v1::DTYPE_U8, {16}, v1::DTYPE_I32, {16}, 256),   // u8 with token labels
           Info("c", v1::DTYPE_I32, {4, 4}, v1::DTYPE_I32, {4, 4}, 256),
           Info("d", v1::DTYPE_F16, {16}, v1::DTYPE_I32, {}, 10),
           Info("e", v1::DTYPE_U8, {16}, v1::DTYPE_I64, {}, 10),
           Info("f", v1::DTYPE_I32, {16}, v1::DTYPE_I32, {16}, 0),   // no vocab
           Info("g", v1::DTYPE_U8, {16}, v1::DTYPE_I32, {}, 0),      // no classes
       }) {
    auto in = ClassifyDataset(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(in.status())) << bad.name() << ": " << in.status();
    EXPECT_TRUE(absl::StrContains(in.status().message(), "dataset " + bad.name()))
        << in.status();
  }
  auto c = ClassifyDataset(Info("c", v1::DTYPE_I32, {4, 4}, v1::DTYPE_I32, {4, 4}, 256));
  EXPECT_TRUE(absl::StrContains(c.status().message(), "DTYPE_I32 [4,4]")) << c.status();
}

TEST(DatasetInputsTest, ModelMustFitTheDataset) {
  const DatasetInputs images = *ClassifyDataset(kImages);
  const DatasetInputs text = *ClassifyDataset(kText);
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

class FakeLister final : public v1::DataServer::Service {
 public:
  grpc::Status ListDatasets(grpc::ServerContext*, const v1::ListDatasetsRequest*,
                            v1::ListDatasetsResponse* response) override {
    *response->add_datasets() = kImages;
    *response->add_datasets() = kText;
    return grpc::Status::OK;
  }
};

RetryOptions Quick() {
  RetryOptions r;
  r.max_attempts = 2;
  r.call_timeout = absl::Seconds(5);
  r.initial_backoff = absl::Milliseconds(1);
  r.wait_for_ready = false;
  return r;
}

TEST(FetchDatasetInfoTest, FindsByNameAndFailsOver) {
  FakeLister fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok()) << server.status();
  std::string dead;
  {
    FakeLister other;
    auto gone = RpcServer::Start({}, {&other});
    ASSERT_TRUE(gone.ok());
    dead = (*gone)->address();
  }  // nothing listens there now

  auto info = FetchDatasetInfo({(*server)->address()}, "fortunes/train", Quick());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->SerializeAsString(), kText.SerializeAsString());

  auto over = FetchDatasetInfo({dead, (*server)->address()}, "fashion-mnist/train", Quick());
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ(over->feature_spec().dtype(), v1::DTYPE_U8);

  auto missing = FetchDatasetInfo({(*server)->address()}, "imagenet", Quick());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(),
                                "fashion-mnist/train, fortunes/train"))
      << missing.status();

  auto none = FetchDatasetInfo({dead}, "fortunes/train", Quick());
  EXPECT_TRUE(absl::IsUnavailable(none.status())) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(), dead)) << none.status();
  EXPECT_TRUE(absl::IsInvalidArgument(FetchDatasetInfo({}, "x", Quick()).status()));
}

}  // namespace
}  // namespace data
}  // namespace tandem
