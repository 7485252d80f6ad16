#include "tools/tandem/job_status.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/io/file.h"
#include "common/rpc/tls.h"
#include "common/rpc/tls_certs.h"
#include "services/coordinator/coordinator_server.h"
#include "tools/tandem/run_dir.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace cli {
namespace {

TEST(JobStatusTest, FetchesAndFormatsARunningCoordinator) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "status-test";
  o.coordinator.min_workers = 2;
  o.coordinator.max_workers = 2;
  o.run_liveness_thread = false;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto s = FetchJobStatus(absl::StrCat("127.0.0.1:", (*server)->port()), "status-test",
                          absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::GetJobStatusResponse::WAITING);
  const std::string text = FormatJobStatus(*s);
  EXPECT_TRUE(absl::StartsWith(text, "state WAITING  generation 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "last checkpoint: none")) << text;
  EXPECT_TRUE(absl::StrContains(text, "of min 2 worker(s) waiting")) << text;
  (*server)->Shutdown();
}

TEST(JobStatusTest, FormatsWorkersAndCheckpoint) {
  v1::GetJobStatusResponse s;
  s.set_state(v1::GetJobStatusResponse::RUNNING);
  s.set_generation(3);
  s.set_world_size(2);
  s.set_restarts(1);
  s.mutable_last_checkpoint()->set_step(120);
  s.mutable_last_checkpoint()->set_path("/ckpt/step-120");
  s.mutable_last_checkpoint()->mutable_cursor()->set_epoch(1);
  v1::WorkerStatus* w = s.add_workers();
  w->set_rank(1);
  w->set_worker_id("worker-3");
  w->mutable_endpoint()->set_host("127.0.0.1");
  w->mutable_endpoint()->set_metrics_port(9123);
  w->mutable_progress()->set_step(130);
  w->mutable_progress()->set_loss(0.25);
  const std::string text = FormatJobStatus(s);
  EXPECT_TRUE(absl::StrContains(text, "state RUNNING  generation 3  world 2  restarts 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "step 120 epoch 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "/ckpt/step-120")) << text;
  EXPECT_TRUE(absl::StrContains(text, "rank 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "worker-3")) << text;
  EXPECT_TRUE(absl::StrContains(text, "loss 0.2500")) << text;
  EXPECT_TRUE(absl::StrContains(text, "http://127.0.0.1:9123/metrics")) << text;
  EXPECT_FALSE(absl::StrContains(text, "shard servers")) << text;
  v1::ShardServerStatus* v = s.add_shard_servers();
  v->set_server_id("shard1");
  v->set_address("10.0.0.2:7201");
  v->add_ranges()->set_end(1000);
  v->set_bytes_served(3 << 20);
  v->set_steps_applied(42);
  v->set_step(42);
  v->set_generation(3);
  const std::string with_servers = FormatJobStatus(s);
  EXPECT_TRUE(absl::StrContains(with_servers,
                                "  shard1  10.0.0.2:7201  ranges [0, 1000)  served 3.00 MiB  "
                                "steps applied 42  at step 42 (generation 3)"))
      << with_servers;
}

// A shard server given --coordinator reports itself; `tandem status`
// lists it with its ranges and bytes served.
TEST(JobStatusTest, ListsShardServersThatReported) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "status-test";
  o.run_liveness_thread = false;
  auto coordinator = CoordinatorServer::Start(o);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*coordinator)->port());
  shardserver::ShardServerOptions so;
  so.server_id = "shard0";
  so.coordinator = target;
  so.job_id = "status-test";
  so.report_period = absl::ZeroDuration();  // reports by hand
  auto server = shardserver::ShardServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  // Not initialised yet: listed without ranges.
  ASSERT_TRUE((*server)->ReportNow().ok());
  auto s = FetchJobStatus(target, "status-test", absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->shard_servers_size(), 1);
  EXPECT_EQ(s->shard_servers(0).address(), (*server)->address());
  std::string text = FormatJobStatus(*s);
  EXPECT_TRUE(absl::StrContains(text, "shard servers: 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "shard0  " + (*server)->address() +
                                          "  ranges none (not initialised)  served 0 B"))
      << text;

  // Given a range and a served push, the next report says so.
  shardserver::InitConfig c;
  c.job_id = "status-test";
  c.generation = 1;
  c.range = {100, 612};
  c.chunk_elements = 256;
  c.world_size = 1;
  c.optimizer.set_name("sgd");
  auto init = (*server)->store()->BeginInit(c);
  ASSERT_TRUE(init.ok()) << init.status();
  std::vector<float> params(512, 1.f);
  ASSERT_TRUE((*init)->Fill(100, params.data(), 512).ok());
  ASSERT_TRUE((*server)->store()->CommitInit(std::move(*init)).ok());
  ASSERT_TRUE((*server)->ReportNow().ok());
  s = FetchJobStatus(target, "status-test", absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s.status();
  text = FormatJobStatus(*s);
  EXPECT_TRUE(absl::StrContains(text, "ranges [100, 612)  served 0 B  steps applied 0  at step 0 "
                                      "(generation 1)"))
      << text;
  (*server)->Shutdown();
  (*coordinator)->Shutdown();
}

// A port bound but never listened on: connections to it are refused.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      target_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
    }
  }
  ~ClosedPort() { close(fd_); }
  const std::string& target() const { return target_; }

 private:
  int fd_ = -1;
  std::string target_;
};

TEST(JobStatusTest, NothingListensIsSaidAtOnceAndAFinishedRunSaysSo) {
  ClosedPort port;
  ASSERT_FALSE(port.target().empty());
  const absl::Time start = absl::Now();
  auto s = FetchJobStatus(port.target(), "x", absl::Seconds(30));
  ASSERT_FALSE(s.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "waited for a port nothing listens on";
  EXPECT_TRUE(absl::StrContains(s.status().message(), port.target())) << s.status();
  EXPECT_EQ(ClassifyStatusFailure(port.target(), s.status()), StatusFailure::kNothingListens);
  std::string why = ExplainStatusFailure(port.target(), s.status(), false, "");
  EXPECT_TRUE(absl::StartsWith(why, "nothing listens at " + port.target())) << why;
  // tandem local's run directory (where --token_file lives) knows the end.
  const std::string run_dir = std::string(std::getenv("TEST_TMPDIR")) + "/finished-run";
  v1::CoordinatorState state;
  state.set_job_id("local");
  state.set_finished(true);
  ASSERT_TRUE(MakeDirectories(run_dir + "/coordinator-state").ok());
  ASSERT_TRUE(WriteFileAtomically(run_dir + "/coordinator-state/coordinator_state.pb",
                                  state.SerializeAsString())
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(ResultPath(run_dir), "epoch 1 test accuracy 0.8538\n").ok());
  why = ExplainStatusFailure(port.target(), s.status(), false, run_dir);
  EXPECT_TRUE(absl::StartsWith(why, "job finished: ")) << why;
  EXPECT_TRUE(absl::StrContains(why, "test accuracy 0.8538")) << why;
}

TEST(JobStatusTest, TokenRefusedIsNamed) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "status-test";
  o.run_liveness_thread = false;
  o.auth_token = "the-right-token";
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  auto s = FetchJobStatus(target, "status-test", absl::Seconds(10), {.auth_token = "wrong"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(ClassifyStatusFailure(target, s.status()), StatusFailure::kTokenRefused) << s.status();
  const std::string why = ExplainStatusFailure(target, s.status(), false, "");
  EXPECT_TRUE(absl::StartsWith(why, "token refused")) << why;
  EXPECT_TRUE(absl::StrContains(why, "--token_file")) << why;
  EXPECT_TRUE(
      FetchJobStatus(target, "status-test", absl::Seconds(10), {.auth_token = "the-right-token"})
          .ok());
  (*server)->Shutdown();
}

TEST(JobStatusTest, TlsRefusedIsNamed) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/tls";
  auto certs = MakeJobCertificates(dir, {});
  ASSERT_TRUE(certs.ok()) << certs.status();
  TlsOptions t;
  t.cert_file = certs->cert_file;
  t.key_file = certs->key_file;
  t.ca_file = certs->ca_file;
  t.server_name = certs->server_name;
  auto tls = LoadTls(t);
  ASSERT_TRUE(tls.ok()) << tls.status();
  CoordinatorServerOptions o;
  o.coordinator.job_id = "status-test";
  o.run_liveness_thread = false;
  o.rpc.tls = *tls;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  // Plain text to a TLS coordinator.
  auto s = FetchJobStatus(target, "status-test", absl::Seconds(10), {.tls = TlsConfig{}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(ClassifyStatusFailure(target, s.status()), StatusFailure::kTlsRefused) << s.status();
  const std::string why = ExplainStatusFailure(target, s.status(), false, "");
  EXPECT_TRUE(absl::StartsWith(why, "TLS refused: ")) << why;
  EXPECT_TRUE(absl::StrContains(why, "--tls_ca")) << why;
  EXPECT_TRUE(FetchJobStatus(target, "status-test", absl::Seconds(10), {.tls = *tls}).ok());
  (*server)->Shutdown();
}

// The coordinator has a global batch only under --batch auto: the status
// line then shows what the workers report, not 0.
TEST(JobStatusTest, GlobalBatchComesFromTheWorkersReports) {
  v1::GetJobStatusResponse s;
  s.set_state(v1::GetJobStatusResponse::RUNNING);
  EXPECT_TRUE(absl::StrContains(FormatJobStatus(s), "global batch (not reported yet)"));
  s.add_workers()->mutable_progress()->set_global_batch(256);
  EXPECT_TRUE(absl::StrContains(FormatJobStatus(s), "  global batch 256\n")) << FormatJobStatus(s);
}

}  // namespace
}  // namespace cli
}  // namespace tandem

namespace tandem {
namespace cli {
namespace {

TEST(JobStatusStragglerTest, StatusListsStragglersOrSaysNone) {
  v1::GetJobStatusResponse s;
  s.set_state(v1::GetJobStatusResponse::RUNNING);
  EXPECT_TRUE(absl::StrContains(FormatJobStatus(s), "stragglers: none\n")) << FormatJobStatus(s);
  v1::Straggler* x = s.add_stragglers();
  x->set_rank(2);
  x->set_message(
      "straggler: rank 2 (worker-2) is 41% slower than the median for 12 steps: compute");
  const std::string text = FormatJobStatus(s);
  EXPECT_FALSE(absl::StrContains(text, "stragglers: none")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nstraggler: rank 2 (worker-2) is 41% slower")) << text;
}

// Two workers heartbeat step times into a real coordinator; `tandem
// local`'s watch prints the naming once and the clearing once.
TEST(JobStatusStragglerTest, JobWatchHandsBackEachNamingAndClearingOnce) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "watch";
  o.coordinator.min_workers = o.coordinator.max_workers = 2;
  o.coordinator.settle_time = absl::ZeroDuration();
  o.coordinator.straggler.window = 1;
  o.run_liveness_thread = false;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  CoordinatorCore& core = (*server)->core();
  std::vector<std::thread> joins;
  std::vector<int> ranks(2);
  for (int i = 0; i < 2; ++i) {
    joins.emplace_back([&, i] {
      v1::JoinRequest r;
      r.set_worker_id(absl::StrCat("worker-", i));
      auto reply = core.Join(r, absl::Seconds(20));
      ASSERT_TRUE(reply.ok()) << reply.status();
      ranks[i] = reply->rank();
    });
  }
  for (auto& t : joins) t.join();
  auto beat = [&](double slow_compute) {
    for (int i = 0; i < 2; ++i) {
      v1::HeartbeatRequest r;
      r.set_worker_id(absl::StrCat("worker-", i));
      r.set_generation(1);
      r.mutable_timing()->set_steps(10);
      r.mutable_timing()->set_compute_seconds(i == 1 ? slow_compute : 0.1);
      ASSERT_TRUE(core.Heartbeat(r).ok());
    }
  };
  auto watch = JobWatch::Create(absl::StrCat("127.0.0.1:", (*server)->port()), "watch");
  beat(0.2);
  watch->NewlyLost(absl::Seconds(10));
  std::vector<std::string> lines = watch->StragglerChanges();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(
      lines[0], absl::StrCat("straggler: rank ", ranks[1], " (worker-1) is 100% slower")))
      << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], ": compute")) << lines[0];
  beat(0.2);
  watch->NewlyLost(absl::Seconds(10));
  EXPECT_TRUE(watch->StragglerChanges().empty()) << "named once";
  beat(0.1);
  watch->NewlyLost(absl::Seconds(10));
  lines = watch->StragglerChanges();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], absl::StrCat("straggler cleared: rank ", ranks[1], " (worker-1)"));
  (*server)->Shutdown();
}

// A resumed run's coordinator holds the previous run's generation; a
// member of it expelled for silence is not this run's worker of that name:
// the watch hands back only losses in later generations.
TEST(JobWatchTest, LossesInTheGenerationHeldAtTheStartAreNotHandedBack) {
  absl::Mutex mu;
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  CoordinatorServerOptions o;
  o.coordinator.job_id = "watch";
  o.coordinator.min_workers = o.coordinator.max_workers = 1;
  o.coordinator.settle_time = absl::ZeroDuration();
  o.coordinator.clock = [&] {
    absl::MutexLock lock(&mu);
    return now;
  };
  o.run_liveness_thread = false;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  CoordinatorCore& core = (*server)->core();
  // worker-0 in generation `g` falls silent and is expelled.
  auto join_and_fall_silent = [&](int64_t g) {
    v1::JoinRequest r;
    r.set_worker_id("worker-0");
    r.set_instance(absl::StrCat("pid-", g));
    auto reply = core.Join(r, absl::Seconds(20));
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_EQ(reply->generation(), g);
    {
      absl::MutexLock lock(&mu);
      now += absl::Minutes(5);
    }
    ASSERT_TRUE(core.CheckLiveness());
  };
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  join_and_fall_silent(1);  // the previous run's worker-0
  auto watch = JobWatch::Create(target, "watch");
  ASSERT_TRUE(watch->IgnoreEarlierGenerations(absl::Seconds(10)));
  EXPECT_TRUE(watch->NewlyLost(absl::Seconds(10)).empty());
  // Without the call, that loss is handed back (and its name's process killed).
  auto unaware = JobWatch::Create(target, "watch");
  ASSERT_EQ(unaware->NewlyLost(absl::Seconds(10)).size(), 1u);
  join_and_fall_silent(2);  // this run's worker-0
  const std::vector<v1::LostWorker> lost = watch->NewlyLost(absl::Seconds(10));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id(), "worker-0");
  EXPECT_EQ(lost[0].generation(), 2);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace cli
}  // namespace tandem
