// Gloo collectives with one thread per rank over an in-memory store, across
// world sizes 1, 2, 3, 5 and element counts 0, 1, 1000, 1,000,000.
#include "common/comm/gloo/gloo_communicator.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/testing/conformance.h"
#include "common/comm/testing/rank_threads.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

// Runs body(rank, comm) on one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(
    int world, const std::function<absl::Status(int, Communicator&)>& body,
    absl::Duration timeout = absl::Seconds(60)) {
  return comm_testing::RunRanks(
      world,
      [&](int rank, gloo::rendezvous::Store& store)
          -> absl::StatusOr<std::unique_ptr<Communicator>> {
        GlooOptions o;
        o.rank = rank;
        o.world_size = world;
        o.store = &store;
        o.timeout = timeout;
        return GlooCommunicator::Create(o);
      },
      body);
}


class GlooSweep : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

// The shared conformance checks (common/comm/testing/conformance.h).
TEST_P(GlooSweep, AllReduceSumsEveryElement) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckAllReduceSum(c, count, /*rounds=*/1);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(GlooSweep, AllReduceMaxPicksLargest) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckAllReduceMax(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(GlooSweep, ReduceScatterAndAllGatherRoundTrip) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckReduceScatterAllGather(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(GlooSweep, BroadcastAllToAllAndBarrier) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckBroadcastAllToAllBarrier(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

INSTANTIATE_TEST_SUITE_P(WorldsAndCounts, GlooSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5),
                                            ::testing::Values(int64_t{0}, int64_t{1},
                                                              int64_t{1000}, int64_t{1000000})),
                         [](const auto& info) {
                           return absl::StrCat("w", std::get<0>(info.param), "_n",
                                               std::get<1>(info.param));
                         });

TEST(Gloo, BroadcastAllToAllAndMax) {
  const int world = 3;
  auto results = RunRanks(world, [](int rank, Communicator& c) {
    std::vector<int32_t> b = {rank, rank * 10, 7};
    if (auto s = c.Broadcast(b.data(), b.size() * sizeof(int32_t), 2); !s.ok()) return s;
    if (b != std::vector<int32_t>{2, 20, 7}) return absl::InternalError("broadcast");
    std::vector<int32_t> in(world), out(world);
    for (int j = 0; j < world; ++j) in[j] = rank * 100 + j;  // block j -> rank j
    if (auto s = c.AllToAll(in.data(), out.data(), sizeof(int32_t)); !s.ok()) return s;
    for (int i = 0; i < world; ++i) {
      if (out[i] != i * 100 + rank) return absl::InternalError("alltoall");
    }
    float m = static_cast<float>(rank) - 0.5f;
    if (auto s = c.AllReduce(&m, 1, ReduceOp::kMax); !s.ok()) return s;
    if (m != world - 1.5f) return absl::InternalError("max");
    return c.Barrier();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST(Gloo, BadRankIsInvalidArgument) {
  gloo::rendezvous::HashStore store;
  GlooOptions o;
  o.rank = 2;
  o.world_size = 2;
  o.store = &store;
  EXPECT_EQ(GlooCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.store = nullptr;
  EXPECT_EQ(GlooCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Gloo, PeerThatStopsCallingTimesOutWithAnError) {
  // Rank 1 connects, then never joins the allreduce: rank 0 must get an
  // error naming the operation, not hang.
  auto results = RunRanks(
      2,
      [](int rank, Communicator& c) -> absl::Status {
        if (rank == 1) return absl::OkStatus();
        std::vector<float> data(1000, 1.0f);
        return c.AllReduce(data.data(), data.size());
      },
      absl::Milliseconds(500));
  EXPECT_TRUE(results[1].ok());
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].message().find("allreduce"), std::string::npos) << results[0];
  EXPECT_NE(results[0].message().find("rank 0"), std::string::npos) << results[0];
}

TEST(Gloo, AbortWakesACollectiveWaitingForAHungPeer) {
  // A 10-minute collective timeout: only Abort can end the wait in time.
  for (int world : {2, 3}) {
    auto results = comm_testing::RunAbortOfHungCollective(
        world,
        [world](int rank, gloo::rendezvous::Store& store)
            -> absl::StatusOr<std::unique_ptr<Communicator>> {
          GlooOptions o;
          o.rank = rank;
          o.world_size = world;
          o.store = &store;
          o.timeout = absl::Minutes(10);
          return GlooCommunicator::Create(o);
        },
        "generation 7 ended: rank 2 missed 3 heartbeats");
    EXPECT_TRUE(results[world - 1].ok()) << results[world - 1];
    // Rank 0 is aborted first, with the reason. Its closed pairs may fail
    // a later rank an instant before that rank's own Abort (a peer-closed
    // error, UNAVAILABLE): either way it did not wait for the timeout.
    for (int r = 0; r + 1 < world; ++r) {
      EXPECT_NE(results[r].message().find("allreduce"), std::string::npos) << results[r];
      if (r > 0 && absl::IsUnavailable(results[r])) continue;
      EXPECT_EQ(results[r].code(), absl::StatusCode::kAborted) << results[r];
      EXPECT_NE(results[r].message().find("rank 2 missed 3 heartbeats"), std::string::npos)
          << results[r];
    }
  }
}

}  // namespace
}  // namespace tandem
