#include "common/data/dataset_info_client.h"

#include "absl/strings/match.h"
#include "common/rpc/server.h"
#include "common/data/dataset_info_testutil.h"
#include "gtest/gtest.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace data {
namespace {

const v1::DatasetInfo kImages = FashionMnistInfo();
const v1::DatasetInfo kText = FortunesInfo();

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
