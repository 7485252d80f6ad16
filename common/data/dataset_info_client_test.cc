#include "common/data/dataset_info_client.h"

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
