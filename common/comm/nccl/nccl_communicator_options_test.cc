// NcclCommunicator::Create rejects bad options before touching the device,
// and reports a missing GPU as UNAVAILABLE. Runs without a device.
#include <cuda_runtime.h>

#include "common/comm/nccl/nccl_communicator.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

NcclKv NoKv() {
  NcclKv kv;
  kv.put = [](const std::string&, const std::string&) { return absl::OkStatus(); };
  kv.get = [](const std::string& key, absl::Duration) -> absl::StatusOr<std::string> {
    return absl::NotFoundError(key);
  };
  return kv;
}

TEST(NcclCommunicatorOptions, BadRankOrWorldIsInvalidArgument) {
  NcclOptions o;
  o.kv = NoKv();
  o.world_size = 2;
  o.rank = 2;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = -1;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.world_size = 0;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NcclCommunicatorOptions, MissingKvFunctionIsInvalidArgument) {
  NcclOptions o;
  o.world_size = 2;
  o.rank = 0;  // rank 0 needs put
  auto s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("put"), std::string::npos) << s;
  o.rank = 1;  // the others need get
  o.kv.put = NoKv().put;
  s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("get"), std::string::npos) << s;
}

TEST(NcclCommunicatorOptions, NoDeviceIsUnavailable) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    GTEST_SKIP() << "a device is present; the GPU test covers this path";
  }
  NcclOptions o;
  o.kv = NoKv();
  auto s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s;
}

TEST(NcclCommunicatorOptions, PeerWithoutTheIdFailsWithTheKvError) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "needs a device to get as far as the id exchange";
  }
  NcclOptions o;
  o.kv = NoKv();
  o.world_size = 2;
  o.rank = 1;
  o.timeout = absl::Milliseconds(100);
  auto s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("unique id"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem
