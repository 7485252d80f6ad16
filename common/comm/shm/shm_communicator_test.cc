// Shared-memory collectives: one thread per rank over an in-memory store
// across world sizes 1..5 and counts 0, 1, 1000, 1,000,000 (several chunks),
// every collective, a peer that stops calling, and real processes (fork)
// over a FileStore, including one that exits mid-run.
#include "common/comm/shm/shm_communicator.h"
#include "common/comm/peer_exited.h"
#include "common/comm/testing/conformance.h"
#include "common/comm/testing/rank_threads.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

// Small chunks so 1000 and 1,000,000 floats span many chunks.
constexpr int64_t kSmallChunk = 64 << 10;

// Runs body(rank, comm) on one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(
    int world, const std::function<absl::Status(int, Communicator&)>& body,
    absl::Duration timeout = absl::Seconds(60), int64_t chunk_bytes = kSmallChunk) {
  return comm_testing::RunRanks(
      world,
      [&](int rank, gloo::rendezvous::Store& store)
          -> absl::StatusOr<std::unique_ptr<Communicator>> {
        ShmOptions o;
        o.rank = rank;
        o.world_size = world;
        o.store = &store;
        o.prefix = "test/grad";
        o.timeout = timeout;
        o.chunk_bytes = chunk_bytes;
        return ShmCommunicator::Create(o);
      },
      body);
}

using comm_testing::ExactValue;

class ShmSweep : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

// The shared conformance checks (common/comm/testing/conformance.h).
TEST_P(ShmSweep, AllReduceSumsEveryElement) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckAllReduceSum(c, count, /*rounds=*/2);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(ShmSweep, AllReduceMaxPicksLargest) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckAllReduceMax(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(ShmSweep, ReduceScatterAndAllGatherRoundTrip) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckReduceScatterAllGather(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(ShmSweep, BroadcastAllToAllAndBarrier) {
  const auto [world, count] = GetParam();
  auto results = RunRanks(world, [count = count](int, Communicator& c) {
    return comm_testing::CheckBroadcastAllToAllBarrier(c, count);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

INSTANTIATE_TEST_SUITE_P(WorldsAndCounts, ShmSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(int64_t{0}, int64_t{1},
                                                              int64_t{1000}, int64_t{1000000})),
                         [](const auto& info) {
                           return absl::StrCat("w", std::get<0>(info.param), "_n",
                                               std::get<1>(info.param));
                         });

TEST(Shm, MixedCollectivesBackToBackKeepResultsApart) {
  // Consecutive collectives of different kinds with no barrier between them:
  // checks the shared-area discipline (no op overwrites what a slower rank
  // still reads).
  const int world = 4;
  auto results = RunRanks(world, [](int rank, Communicator& c) {
    std::vector<float> a(5000), g(world);
    for (int it = 0; it < 50; ++it) {
      std::fill(a.begin(), a.end(), static_cast<float>(rank + it));
      if (auto s = c.AllReduce(a.data(), a.size()); !s.ok()) return s;
      const float want = 6.0f + 4.0f * it;
      if (a.front() != want || a.back() != want) return absl::InternalError("allreduce");
      const float mine = static_cast<float>(rank * 100 + it);
      if (auto s = c.AllGather(&mine, g.data(), sizeof(float)); !s.ok()) return s;
      for (int j = 0; j < world; ++j) {
        if (g[j] != j * 100 + it) return absl::InternalError("allgather");
      }
      float b = static_cast<float>(rank == it % world ? it : -1);
      if (auto s = c.Broadcast(&b, sizeof(b), it % world); !s.ok()) return s;
      if (b != it) return absl::InternalError("broadcast");
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST(Shm, AllReduceSumsInRankOrderOnEveryRank) {
  // Non-integer values, where the order of the additions shows: every rank
  // must hold exactly ((x0 + x1) + x2) + ..., whichever rank reduced each
  // element (a rank reads its own share from its input, not its slot).
  for (int world : {2, 3, 5}) {
    const int64_t count = 70001;  // several 64 KiB chunks, ragged shares
    auto value = [](int rank, int64_t i) {
      return static_cast<float>(std::sin(0.37 * i + rank) * (1 + rank * 1e-3));
    };
    std::vector<std::vector<float>> got(world);
    auto results = RunRanks(world, [&](int rank, Communicator& c) {
      std::vector<float> a(count);
      for (int64_t i = 0; i < count; ++i) a[i] = value(rank, i);
      absl::Status s = c.AllReduce(a.data(), count);
      got[rank] = std::move(a);
      return s;
    });
    for (int r = 0; r < world; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
    for (int64_t i = 0; i < count; ++i) {
      float want = value(0, i);
      for (int r = 1; r < world; ++r) want += value(r, i);
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(got[r][i], want) << "world " << world << " rank " << r << " element " << i;
      }
    }
  }
}

TEST(Shm, AllReduceSumOfSquaresIsAllReduceAndTheNormOnEveryRank) {
  // The fused sum of squares: the elements are AllReduce's bit for bit, the
  // sum matches a double reference over the summed elements, every rank gets
  // the same value, and plain allreduces in between do not disturb it.
  for (int world : {1, 2, 3, 5}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{70001}}) {
      auto value = [](int rank, int64_t i) {
        return static_cast<float>(std::sin(0.37 * i + rank) * (1 + rank * 1e-3));
      };
      std::vector<std::vector<float>> got(world);
      std::vector<double> sums(world, -1);
      auto results = RunRanks(world, [&](int rank, Communicator& c) {
        if (!c.fuses_sum_of_squares()) return absl::InternalError("shm should fuse");
        std::vector<float> a(count), plain(count, 1.0f);
        for (int64_t i = 0; i < count; ++i) a[i] = value(rank, i);
        if (auto s = c.AllReduce(plain.data(), count); !s.ok()) return s;
        if (auto s = c.AllReduceSumOfSquares(a.data(), count, &sums[rank]); !s.ok()) return s;
        if (auto s = c.AllReduce(plain.data(), count); !s.ok()) return s;
        for (float p : plain) {
          if (p != world * world) return absl::InternalError("plain allreduce disturbed");
        }
        got[rank] = std::move(a);
        return absl::OkStatus();
      });
      for (int r = 0; r < world; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
      double want_sum = 0;
      for (int64_t i = 0; i < count; ++i) {
        float want = value(0, i);
        for (int r = 1; r < world; ++r) want += value(r, i);
        want_sum += static_cast<double>(want) * want;
        for (int r = 0; r < world; ++r) ASSERT_EQ(got[r][i], want) << "rank " << r << " at " << i;
      }
      for (int r = 0; r < world; ++r) {
        EXPECT_NEAR(sums[r], want_sum, 1e-12 * want_sum) << "world " << world << " rank " << r;
        EXPECT_EQ(sums[r], sums[0]) << "world " << world << ": ranks disagree";
      }
    }
  }
}

TEST(Shm, AllReduceSumOfSquaresIsNonFiniteOnEveryRankWhenOneElementIs) {
  const int world = 3;
  const int64_t count = 50000;  // several chunks; the bad element in the last
  for (float bad : {std::nanf(""), INFINITY}) {
    std::vector<double> sums(world, 0);
    auto results = RunRanks(world, [&](int rank, Communicator& c) {
      std::vector<float> a(count, 0.5f);
      if (rank == 1) a[count - 3] = bad;
      return c.AllReduceSumOfSquares(a.data(), count, &sums[rank]);
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r];
      EXPECT_FALSE(std::isfinite(sums[r])) << "rank " << r << " got " << sums[r];
    }
  }
}

TEST(Shm, BadOptionsAreInvalidArgument) {
  gloo::rendezvous::HashStore store;
  ShmOptions o;
  o.rank = 2;
  o.world_size = 2;
  o.store = &store;
  EXPECT_EQ(ShmCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.store = nullptr;
  EXPECT_EQ(ShmCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.store = &store;
  o.chunk_bytes = 0;
  EXPECT_EQ(ShmCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.chunk_bytes = 4096;
  o.timeout = absl::ZeroDuration();
  EXPECT_EQ(ShmCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Shm, BroadcastRootOutOfRangeIsInvalidArgument) {
  auto results = RunRanks(2, [](int, Communicator& c) -> absl::Status {
    int x = 0;
    absl::Status s = c.Broadcast(&x, sizeof(x), 2);
    if (s.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError("accepted");
    return c.Barrier();  // still usable afterwards
  });
  for (auto& s : results) EXPECT_TRUE(s.ok()) << s;
}

TEST(Shm, SegmentNameIsUnlinkedOnceEveryRankMappedIt) {
  std::vector<std::string> names(2);
  auto results = RunRanks(2, [&](int rank, Communicator& c) {
    names[rank] = static_cast<ShmCommunicator&>(c).segment_name();
    return c.Barrier();
  });
  for (auto& s : results) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(names[0], names[1]);
  EXPECT_NE(names[0].find("test_grad"), std::string::npos) << names[0];
  EXPECT_NE(access(("/dev/shm" + names[0]).c_str(), F_OK), 0) << names[0] << " still exists";
}

TEST(Shm, MissingRankZeroTimesOutAtConnect) {
  gloo::rendezvous::HashStore store;
  ShmOptions o;
  o.rank = 1;
  o.world_size = 2;
  o.store = &store;
  o.timeout = absl::Milliseconds(200);
  auto comm = ShmCommunicator::Create(o);
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("rank 1"), std::string::npos) << comm.status();
}

TEST(Shm, PeerThatStopsCallingTimesOutWithAnError) {
  // Rank 1 connects, then never joins the allreduce: rank 0 must get an
  // error naming the operation, not hang; the instance is unusable after.
  auto results = RunRanks(
      2,
      [](int rank, Communicator& c) -> absl::Status {
        if (rank == 1) return absl::OkStatus();
        std::vector<float> data(1000, 1.0f);
        absl::Status s = c.AllReduce(data.data(), data.size());
        if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
        if (c.Barrier().code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError("usable after a timeout");
        }
        return s;
      },
      absl::Milliseconds(300));
  EXPECT_TRUE(results[1].ok());
  ASSERT_EQ(results[0].code(), absl::StatusCode::kDeadlineExceeded) << results[0];
  EXPECT_NE(results[0].message().find("allreduce"), std::string::npos) << results[0];
  EXPECT_NE(results[0].message().find("rank 0"), std::string::npos) << results[0];
}

TEST(Shm, TimeoutOfOneRankAbortsTheOthersPromptly) {
  // Ranks 0 and 1 wait in a barrier rank 2 never reaches. The first to time
  // out marks the segment aborted; both fail (one DEADLINE_EXCEEDED, the
  // other DEADLINE_EXCEEDED or ABORTED naming the rank that gave up).
  auto results = RunRanks(
      3,
      [](int rank, Communicator& c) -> absl::Status {
        if (rank == 2) return absl::OkStatus();
        return c.Barrier();
      },
      absl::Milliseconds(300));
  EXPECT_TRUE(results[2].ok());
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].code() == absl::StatusCode::kDeadlineExceeded ||
                results[r].code() == absl::StatusCode::kAborted)
        << results[r];
    EXPECT_NE(results[r].message().find(absl::StrCat("rank ", r)), std::string::npos);
  }
}

// ---- One process per rank ---------------------------------------------

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  EXPECT_EQ(system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  return dir;
}

// Forks one child per rank running body(rank, comm) (exit code 0 = pass);
// returns each child's exit code (-1 if it did not exit normally).
std::vector<int> ForkRanks(int world, const std::string& dir, absl::Duration timeout,
                           const std::function<int(int, Communicator&)>& body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      gloo::rendezvous::FileStore store(dir);
      ShmOptions o;
      o.rank = r;
      o.world_size = world;
      o.store = &store;
      o.prefix = "fork";
      o.timeout = timeout;
      o.chunk_bytes = kSmallChunk;
      auto comm = ShmCommunicator::Create(o);
      if (!comm.ok()) {
        fprintf(stderr, "rank %d: %s\n", r, comm.status().ToString().c_str());
        _exit(10);
      }
      _exit(body(r, **comm));
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

TEST(ShmProcesses, AllReduceAcrossForkedProcesses) {
  const int world = 4;
  const std::string dir = FreshDir("shm_fork");
  auto codes = ForkRanks(world, dir, absl::Seconds(60), [](int rank, Communicator& c) {
    std::vector<float> data(300000);
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < data.size(); ++i) data[i] = ExactValue(rank, i) + round;
      if (auto s = c.AllReduce(data.data(), data.size()); !s.ok()) {
        fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] != 10.0f * ((i % 7) + 1) + 4 * round) return 2;
      }
    }
    std::vector<int32_t> all(world);
    const int32_t mine = rank * 3;
    if (!c.AllGather(&mine, all.data(), sizeof(mine)).ok()) return 3;
    for (int j = 0; j < world; ++j) {
      if (all[j] != j * 3) return 4;
    }
    return c.Barrier().ok() ? 0 : 5;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(ShmProcesses, PeerProcessThatExitsIsNamedLongBeforeTheTimeout) {
  // Rank 1 exits without calling (and stays an unreaped zombie until this
  // test reaps it after rank 0). With a 60 s timeout, rank 0 must still fail
  // promptly with UNAVAILABLE naming rank 1; a hang would fail the code check
  // after the timeout, not block the test forever.
  const std::string dir = FreshDir("shm_fork_exit");
  auto codes = ForkRanks(2, dir, absl::Seconds(60), [](int rank, Communicator& c) {
    if (rank == 1) _exit(0);
    std::vector<float> data(1000, 1.0f);
    absl::Status s = c.AllReduce(data.data(), data.size());
    if (s.code() != absl::StatusCode::kUnavailable) {
      fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    if (s.message().find("allreduce") == absl::string_view::npos) return 2;
    if (s.message().find("rank 0") == absl::string_view::npos) return 3;
    if (s.message().find("rank 1") == absl::string_view::npos) return 4;
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(ShmProcesses, KilledPeerProcessFailsTheOthers) {
  // Four ranks loop over allreduces; rank 2 is SIGKILLed mid-run. Every
  // survivor must end with an error naming rank 2 as exited (UNAVAILABLE,
  // or ABORTED after another survivor noticed), well within the 60 s
  // timeout.
  const std::string dir = FreshDir("shm_fork_kill");
  auto codes = ForkRanks(4, dir, absl::Seconds(60), [](int rank, Communicator& c) {
    std::vector<float> data(100000, 1.0f);
    for (int it = 0;; ++it) {
      if (rank == 2 && it == 20) raise(SIGKILL);
      absl::Status s = c.AllReduce(data.data(), data.size());
      if (s.ok()) continue;
      // Both name rank 2 as exited (the worker reports that rank to the
      // coordinator, which then stops waiting for it).
      if ((s.code() == absl::StatusCode::kUnavailable ||
           s.code() == absl::StatusCode::kAborted) &&
          ExitedPeerRank(s.message()) == 2) {
        return 0;
      }
      fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
      return 1;
    }
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], -1);  // killed
  EXPECT_EQ(codes[3], 0);
}

TEST(Shm, AbortWakesACollectiveWaitingForAHungPeer) {
  // A 10-minute collective timeout: only Abort can end the wait in time.
  for (int world : {2, 3}) {
    auto results = comm_testing::RunAbortOfHungCollective(
        world,
        [world](int rank, gloo::rendezvous::Store& store)
            -> absl::StatusOr<std::unique_ptr<Communicator>> {
          ShmOptions o;
          o.rank = rank;
          o.world_size = world;
          o.store = &store;
          o.prefix = absl::StrCat("test/abort", world);
          o.timeout = absl::Minutes(10);
          o.chunk_bytes = kSmallChunk;
          return ShmCommunicator::Create(o);
        },
        "generation 7 ended: rank 2 missed 3 heartbeats");
    EXPECT_TRUE(results[world - 1].ok()) << results[world - 1];
    for (int r = 0; r + 1 < world; ++r) {
      EXPECT_EQ(results[r].code(), absl::StatusCode::kAborted) << results[r];
      EXPECT_NE(results[r].message().find("allreduce"), std::string::npos) << results[r];
      EXPECT_NE(results[r].message().find("rank 2 missed 3 heartbeats"), std::string::npos)
          << results[r];
    }
  }
}

}  // namespace
}  // namespace tandem
