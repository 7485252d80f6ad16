// CoordinatorClient against a real in-process CoordinatorServer (port 0).
#include "services/worker/coordinator_client.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_server.h"

namespace tandem {
namespace worker {
namespace {

class CoordinatorClientTest : public ::testing::Test {
 protected:
  // min_workers 0 = `workers`.
  void Start(int workers, absl::Duration heartbeat = absl::Seconds(1), int min_workers = 0,
             absl::Duration settle = absl::ZeroDuration()) {
    CoordinatorServerOptions o;
    o.coordinator.job_id = "client-test";
    o.coordinator.min_workers = min_workers > 0 ? min_workers : workers;
    o.coordinator.max_workers = workers;
    o.coordinator.settle_time = settle;
    o.coordinator.heartbeat_period = heartbeat;
    o.run_liveness_thread = false;
    o.coordinator.straggler.window = 2;
    auto server = CoordinatorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::unique_ptr<CoordinatorClient> Client(const std::string& id) {
    CoordinatorClientOptions o;
    o.target = absl::StrCat("127.0.0.1:", server_->port());
    o.job_id = "client-test";
    o.worker_id = id;
    auto c = CoordinatorClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  // Joins every client concurrently.
  std::vector<v1::JoinResponse> JoinAll(const std::vector<CoordinatorClient*>& clients) {
    std::vector<v1::JoinResponse> out(clients.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < clients.size(); ++i) {
      threads.emplace_back([&, i] {
        auto r = clients[i]->Join();
        ASSERT_TRUE(r.ok()) << r.status();
        out[i] = *r;
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(CoordinatorClientTest, JoinGivesDenseRanksAndHeartbeatsContinue) {
  Start(2);
  auto a = Client("a"), b = Client("b");
  std::vector<v1::JoinResponse> j = JoinAll({a.get(), b.get()});
  EXPECT_EQ(j[0].generation(), j[1].generation());
  EXPECT_EQ(j[0].world_size(), 2);
  EXPECT_NE(j[0].rank(), j[1].rank());
  EXPECT_EQ(a->rank(), j[0].rank());
  v1::WorkerProgress p;
  p.set_step(17);
  a->SetProgress(p);
  ASSERT_TRUE(a->HeartbeatOnce().ok());
  EXPECT_EQ(a->command().kind, Command::kContinue);
  // The progress reached the coordinator.
  v1::GetJobStatusResponse status = server_->core().GetJobStatus();
  bool found = false;
  for (const auto& w : status.workers()) {
    if (w.worker_id() == "a") {
      found = true;
      EXPECT_EQ(w.progress().step(), 17);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(CoordinatorClientTest, StepTimesReachTheStragglerDetectorWithHeartbeats) {
  Start(2, absl::Minutes(1));  // heartbeats by hand below
  auto a = Client("a"), b = Client("b");
  JoinAll({a.get(), b.get()});
  for (int beat = 0; beat < 3; ++beat) {
    for (int step = 0; step < 10; ++step) {
      a->AddStepTiming(step, /*compute=*/0.013, /*data_wait=*/0, /*comm=*/0.001, /*other=*/0);
      b->AddStepTiming(step, /*compute=*/0.010, /*data_wait=*/0, /*comm=*/0.004, /*other=*/0);
    }
    ASSERT_TRUE(a->HeartbeatOnce().ok());
    ASSERT_TRUE(b->HeartbeatOnce().ok());
  }
  std::vector<v1::Straggler> named = server_->core().stragglers();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].worker_id(), "a");
  EXPECT_EQ(named[0].cause(), "compute");
  EXPECT_NEAR(named[0].slower_fraction(), 0.3 / 1.1, 1e-6);
  // Each beat carried only the steps since the one before: 10 a beat.
  EXPECT_EQ(named[0].steps(), 20);
}

TEST_F(CoordinatorClientTest, FailureReportMakesThePeerRejoinWithAReason) {
  Start(2);
  auto a = Client("a"), b = Client("b");
  std::vector<v1::JoinResponse> j = JoinAll({a.get(), b.get()});
  ASSERT_TRUE(a->ReportFailure("allreduce bucket 3", 1, "peer reset").ok());
  ASSERT_TRUE(b->HeartbeatOnce().ok());
  Command c = b->command();
  EXPECT_EQ(c.kind, Command::kRejoin);
  EXPECT_NE(c.reason.find("allreduce bucket 3"), std::string::npos) << c.reason;
  // Both re-join: a new generation, command reset.
  std::vector<v1::JoinResponse> j2 = JoinAll({a.get(), b.get()});
  EXPECT_EQ(j2[0].generation(), j[0].generation() + 1);
  EXPECT_EQ(b->command().kind, Command::kContinue);
  ASSERT_TRUE(b->HeartbeatOnce().ok());
  EXPECT_EQ(b->command().kind, Command::kContinue);
}

TEST_F(CoordinatorClientTest, AnExitedPeerIsNamedAndNotWaitedFor) {
  // An hour of settle time and no liveness thread: generation 2 can only
  // form because the coordinator took c's exit from a's report.
  Start(3, absl::Minutes(1), /*min_workers=*/2, /*settle=*/absl::Hours(1));
  auto a = Client("a"), b = Client("b"), c = Client("c");
  std::vector<v1::JoinResponse> j = JoinAll({a.get(), b.get(), c.get()});
  ASSERT_TRUE(a->ReportFailure("training step", j[2].rank(), "rank 2 (pid 7) exited",
                               /*peer_exited=*/true)
                  .ok());
  ASSERT_TRUE(b->HeartbeatOnce().ok());
  EXPECT_EQ(b->command().kind, Command::kRejoin);
  EXPECT_NE(b->command().reason.find("(c) exited"), std::string::npos) << b->command().reason;
  std::vector<v1::JoinResponse> j2 = JoinAll({a.get(), b.get()});
  EXPECT_EQ(j2[0].generation(), j[0].generation() + 1);
  EXPECT_EQ(j2[0].world_size(), 2);
}

TEST_F(CoordinatorClientTest, HeartbeatThreadDeliversStop) {
  Start(1, absl::Milliseconds(20));
  auto a = Client("a");
  ASSERT_TRUE(a->Join().ok());
  server_->core().RequestStop("operator pressed Ctrl-C");
  // The background thread (20 ms period) must pick the command up.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (a->command().kind != Command::kStop && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(a->command().kind, Command::kStop);
  EXPECT_NE(a->command().reason.find("Ctrl-C"), std::string::npos) << a->command().reason;
}

TEST_F(CoordinatorClientTest, CommitCheckpointAndLeaveFinishTheJob) {
  Start(1);
  auto a = Client("a");
  ASSERT_TRUE(a->Join().ok());
  v1::CheckpointRecord r;
  r.set_step(40);
  r.set_path("/tmp/x/step-40.tckpt");
  r.mutable_cursor()->set_epoch(1);
  r.mutable_cursor()->set_step_in_epoch(3);
  ASSERT_TRUE(a->CommitCheckpoint(r).ok());
  v1::GetJobStatusResponse s = server_->core().GetJobStatus();
  EXPECT_EQ(s.last_checkpoint().step(), 40);
  EXPECT_EQ(s.last_checkpoint().cursor().step_in_epoch(), 3);
  ASSERT_TRUE(a->Leave(/*finished=*/true).ok());
  EXPECT_EQ(server_->core().GetJobStatus().state(), v1::GetJobStatusResponse::FINISHED);
  // A finished job refuses new joins with a clear error, not a hang.
  auto again = a->Join();
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("finished"), std::string::npos) << again.status();
}

TEST(CoordinatorClientStandaloneTest, UnreachableCoordinatorFailsAfterBoundedRetries) {
  CoordinatorClientOptions o;
  o.target = "127.0.0.1:1";  // nothing listens on port 1
  o.worker_id = "w";
  o.join_attempts = 2;
  auto c = CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Join();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos) << r.status();
}

TEST(CoordinatorClientStandaloneTest, BadOptionsAreRefused) {
  CoordinatorClientOptions o;
  o.worker_id = "w";
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorClient::Create(o).status()));
  o.target = "127.0.0.1:1";
  o.worker_id = "";
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorClient::Create(o).status()));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
