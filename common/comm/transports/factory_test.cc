// The communicator factory: gloo and shm built through CreateCommunicator on
// 2 and 3 ranks (a thread per rank over one HashStore) reduce correctly;
// unknown, missing and unlinked transports and bad options are clear errors.
#include "common/comm/factory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/testing/rank_threads.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using comm_testing::ExactValue;

// A prefix no other test (or concurrent run) uses: shm puts it in the
// segment name.
std::string UniquePrefix() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat("factory_test_", getpid(), "/", info->test_suite_name(), "/", info->name());
}

class FactorySweep : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(FactorySweep, AllReduceSumsOverRanks) {
  const auto [transport, world] = GetParam();
  const std::string prefix = UniquePrefix();
  constexpr int64_t kCount = 1000;
  auto results = comm_testing::RunRanks(
      world,
      [&, transport = transport, world = world](int rank, gloo::rendezvous::Store& store) {
        CommOptions o;
        o.transport = transport;
        o.rank = rank;
        o.world_size = world;
        o.store = &store;
        o.prefix = prefix;
        o.timeout = absl::Seconds(30);
        o.shm_chunk_bytes = 64 << 10;
        return CreateCommunicator(o);
      },
      [transport = transport, world = world](int rank, Communicator& c) -> absl::Status {
        if (c.backend() != transport) {
          return absl::InternalError(absl::StrCat("backend ", c.backend(), " != ", transport));
        }
        if (c.rank() != rank || c.world_size() != world) {
          return absl::InternalError(absl::StrCat("rank ", c.rank(), "/", c.world_size()));
        }
        std::vector<float> data(kCount);
        for (int64_t i = 0; i < kCount; ++i) data[i] = ExactValue(rank, i);
        if (absl::Status s = c.AllReduce(data.data(), kCount, ReduceOp::kSum); !s.ok()) return s;
        for (int64_t i = 0; i < kCount; ++i) {
          float want = 0;
          for (int r = 0; r < world; ++r) want += ExactValue(r, i);
          if (data[i] != want) {
            return absl::InternalError(
                absl::StrCat("element ", i, ": ", data[i], " != ", want, " on rank ", rank));
          }
        }
        return absl::OkStatus();
      });
  ASSERT_EQ(results.size(), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

INSTANTIATE_TEST_SUITE_P(GlooAndShm, FactorySweep,
                         ::testing::Combine(::testing::Values("gloo", "shm"),
                                            ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "_",
                                               std::get<1>(info.param), "ranks");
                         });

TEST(Factory, GlooAndShmAreAlwaysAvailable) {
  EXPECT_TRUE(TransportAvailable("gloo"));
  EXPECT_TRUE(TransportAvailable("shm"));
  EXPECT_FALSE(TransportAvailable("tcp"));
  std::vector<std::string> have = AvailableTransports();
  EXPECT_TRUE(std::is_sorted(have.begin(), have.end()));
  // Nothing else is linked (this test does not link nccl_transport, CUDA
  // build or not) and nothing registers one here (that test has its own
  // binary: factory_registration_test).
  EXPECT_EQ(have, (std::vector<std::string>{"gloo", "shm"}));
  EXPECT_TRUE(CheckTransport("gloo").ok());
}

TEST(Factory, UnknownTransportIsInvalidArgument) {
  gloo::rendezvous::HashStore store;
  CommOptions o;
  o.transport = "mpi";
  o.store = &store;
  absl::Status s = CreateCommunicator(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("transport 'mpi' is unknown: use gloo, shm or nccl"),
            std::string::npos)
      << s;
  EXPECT_EQ(CheckTransport("mpi").code(), absl::StatusCode::kInvalidArgument);
  o.transport = "";
  EXPECT_EQ(CreateCommunicator(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Factory, NcclWithoutTheCudaLibraryIsUnimplemented) {
  gloo::rendezvous::HashStore store;
  CommOptions o;
  o.transport = "nccl";
  o.store = &store;
  absl::Status s = CreateCommunicator(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("transport 'nccl' is not in this binary (built without CUDA)"),
            std::string::npos)
      << s;
  // It says what the binary does have.
  EXPECT_NE(s.message().find("gloo, shm"), std::string::npos) << s;
  EXPECT_EQ(CheckTransport("nccl").code(), absl::StatusCode::kUnimplemented);
}

TEST(Factory, BadRankOrMissingStoreIsInvalidArgument) {
  gloo::rendezvous::HashStore store;
  for (const char* transport : {"gloo", "shm"}) {
    CommOptions o;
    o.transport = transport;
    o.store = &store;
    o.world_size = 2;
    o.rank = 2;
    absl::Status s = CreateCommunicator(o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("rank 2 is not in a world of 2"), std::string::npos) << s;
    o.rank = 0;
    o.world_size = 0;
    EXPECT_EQ(CreateCommunicator(o).status().code(), absl::StatusCode::kInvalidArgument);
    o.world_size = 1;
    o.store = nullptr;
    s = CreateCommunicator(o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("store is required"), std::string::npos) << s;
  }
}

TEST(FactoryDeathTest, RegisteringANameTwiceAborts) {
  EXPECT_DEATH(
      RegisterTransport("gloo",
                        [](const CommOptions&) -> absl::StatusOr<std::unique_ptr<Communicator>> {
                          return absl::InternalError("unused");
                        }),
      "registered twice");
}

}  // namespace
}  // namespace tandem
