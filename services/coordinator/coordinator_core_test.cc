#include "services/coordinator/coordinator_core.h"

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "services/coordinator/manual_clock.h"

namespace tandem {
namespace {

CoordinatorOptions Options(int min, int max, ManualClock* clock = nullptr) {
  CoordinatorOptions o;
  o.job_id = "job";
  o.min_workers = min;
  o.max_workers = max;
  o.settle_time = absl::Milliseconds(100);
  o.heartbeat_period = absl::Seconds(1);
  o.heartbeat_misses = 3;
  if (clock) o.clock = [clock] { return clock->Now(); };
  return o;
}

v1::JoinRequest JoinReq(const std::string& id, const std::string& node = "n0") {
  v1::JoinRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id(id);
  r.set_node(node);
  return r;
}

// Joins `ids` concurrently; returns the responses in the order of ids.
std::vector<absl::StatusOr<v1::JoinResponse>> JoinAll(CoordinatorCore& core,
                                                      const std::vector<std::string>& ids,
                                                      absl::Duration timeout = absl::Seconds(20)) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = core.Join(JoinReq(ids[i], i % 2 ? "b" : "a"), timeout); });
  }
  for (auto& t : threads) t.join();
  return out;
}

v1::HeartbeatResponse Beat(CoordinatorCore& core, const std::string& id, int64_t gen) {
  v1::HeartbeatRequest r;
  r.set_worker_id(id);
  r.set_generation(gen);
  r.mutable_progress()->set_step(7);
  auto reply = core.Heartbeat(r);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *reply : v1::HeartbeatResponse();
}

TEST(Rendezvous, RanksAreDenseUniqueAndGroupedByNode) {
  auto core = CoordinatorCore::Create(Options(2, 4));
  ASSERT_TRUE(core.ok());
  auto replies = JoinAll(**core, {"w0", "w1", "w2", "w3"});
  std::set<int> ranks;
  for (const auto& r : replies) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->generation(), 1);
    EXPECT_EQ(r->world_size(), 4);
    EXPECT_EQ(r->local_world_size(), 2);
    ranks.insert(r->rank());
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  // Node "a" (w0, w2) takes ranks 0-1, node "b" (w1, w3) ranks 2-3.
  EXPECT_LT(replies[0]->rank(), 2);
  EXPECT_LT(replies[2]->rank(), 2);
  EXPECT_GE(replies[1]->rank(), 2);
  EXPECT_NE(replies[0]->local_rank(), replies[2]->local_rank());
}

TEST(Rendezvous, FormsWithMinAfterSettleTime) {
  auto core = CoordinatorCore::Create(Options(2, 8));
  ASSERT_TRUE(core.ok());
  auto replies = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(replies[0].ok() && replies[1].ok());
  EXPECT_EQ(replies[0]->world_size(), 2);
}

TEST(Rendezvous, BelowMinTimesOutWithAClearMessage) {
  auto core = CoordinatorCore::Create(Options(3, 3));
  ASSERT_TRUE(core.ok());
  auto replies = JoinAll(**core, {"w0", "w1"}, absl::Milliseconds(300));
  for (const auto& r : replies) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(r.status().message().find("min_workers is 3"), std::string::npos) << r.status();
  }
}

TEST(Rendezvous, MaxIsRespected) {
  auto core = CoordinatorCore::Create(Options(1, 2));
  ASSERT_TRUE(core.ok());
  auto replies = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(replies[0].ok() && replies[1].ok());
  auto third = (*core)->Join(JoinReq("w2"), absl::Seconds(1));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(Generations, StaleGenerationIsRefusedAndToldToRejoin) {
  auto core = CoordinatorCore::Create(Options(2, 2));
  ASSERT_TRUE(core.ok());
  auto g1 = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(g1[0].ok());
  v1::ReportFailureRequest fail;
  fail.set_worker_id("w0");
  fail.set_generation(1);
  fail.set_rank(g1[0]->rank());
  fail.set_operation("allreduce bucket 3");
  fail.set_peer_rank(g1[1]->rank());
  ASSERT_TRUE((*core)->ReportFailure(fail).ok());

  v1::HeartbeatResponse hb = Beat(**core, "w1", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_NE(hb.reason().find("allreduce bucket 3"), std::string::npos) << hb.reason();

  auto g2 = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(g2[0].ok() && g2[1].ok());
  EXPECT_EQ(g2[0]->generation(), 2);
  EXPECT_EQ((*core)->restarts(), 1);

  v1::KvSetRequest stale;
  stale.set_generation(1);
  stale.set_key("k");
  absl::Status s = (*core)->KvSet(stale);
  // ABORTED: the membership changed (re-join), not a configuration error.
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_NE(s.message().find("generation 1 refused"), std::string::npos) << s;
  EXPECT_EQ(Beat(**core, "w0", 1).command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_EQ(Beat(**core, "w0", 2).command(), v1::HeartbeatResponse::CONTINUE);
}

TEST(Liveness, SilentWorkerEndsTheGenerationNamingItsRank) {
  ManualClock clock;
  auto core = CoordinatorCore::Create(Options(2, 2, &clock));
  ASSERT_TRUE(core.ok());
  auto g = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  for (int i = 0; i < 5; ++i) {
    clock.Advance(absl::Milliseconds(900));
    Beat(**core, "w0", 1);  // w1 stays silent
    if (i < 2) EXPECT_FALSE((*core)->CheckLiveness()) << "ended too early at " << i;
  }
  EXPECT_TRUE((*core)->CheckLiveness());
  v1::HeartbeatResponse hb = Beat(**core, "w0", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_NE(hb.reason().find(absl::StrCat("rank ", g[1]->rank(), " (w1) missed 3 heartbeats")),
            std::string::npos)
      << hb.reason();
  EXPECT_EQ((*core)->GetJobStatus().state(), v1::GetJobStatusResponse::RECOVERING);
  // A failure: survivors are told to abort their collectives, and the lost
  // worker is listed for the supervisor.
  EXPECT_TRUE(hb.failure());
  const v1::GetJobStatusResponse status = (*core)->GetJobStatus();
  ASSERT_EQ(status.lost_size(), 1);
  EXPECT_EQ(status.lost(0).worker_id(), "w1");
  EXPECT_EQ(status.lost(0).rank(), g[1]->rank());
  EXPECT_EQ(status.lost(0).generation(), 1);
  EXPECT_NE(status.lost(0).reason().find("missed 3 heartbeats"), std::string::npos);
}

TEST(Rendezvous, ASecondJobWithTheSameIdsIsRefused) {
  ManualClock clock;
  auto core = CoordinatorCore::Create(Options(1, 1, &clock));
  ASSERT_TRUE(core.ok());
  v1::JoinRequest first = JoinReq("w0");
  first.set_instance("pid1");
  ASSERT_TRUE((*core)->Join(first, absl::Seconds(5)).ok());
  v1::JoinRequest intruder = JoinReq("w0");
  intruder.set_instance("pid2");
  absl::StatusOr<v1::JoinResponse> refused = (*core)->Join(intruder, absl::Seconds(5));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
  EXPECT_NE(refused.status().message().find("second job"), std::string::npos);
  EXPECT_NE(refused.status().message().find("rank 0"), std::string::npos);
  // The running job is untouched.
  EXPECT_EQ(Beat(**core, "w0", 1).command(), v1::HeartbeatResponse::CONTINUE);
  // Once the member has been silent past the liveness limit, a new process
  // with its id may take over (a worker restarted by its orchestrator).
  clock.Advance(absl::Seconds(4));
  EXPECT_TRUE((*core)->Join(intruder, absl::Seconds(5)).ok());
}

TEST(Liveness, APlannedEndIsNotAFailureUntilARankFailsInIt) {
  auto core = CoordinatorCore::Create(Options(2, 2));
  ASSERT_TRUE(core.ok());
  auto g = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  // w1 leaves (not finished): the generation ends, but nothing failed, so
  // the others finish their step and re-join at a step boundary.
  v1::LeaveRequest leave;
  leave.set_worker_id("w1");
  leave.set_generation(1);
  ASSERT_TRUE((*core)->Leave(leave).ok());
  v1::HeartbeatResponse hb = Beat(**core, "w0", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_FALSE(hb.failure()) << hb.reason();
  EXPECT_EQ((*core)->GetJobStatus().lost_size(), 0);
  // A rank then reports a failed collective in that generation: now every
  // rank still in it must abort.
  v1::ReportFailureRequest failed;
  failed.set_worker_id("w0");
  failed.set_generation(1);
  failed.set_operation("training step");
  ASSERT_TRUE((*core)->ReportFailure(failed).ok());
  EXPECT_TRUE(Beat(**core, "w0", 1).failure());
}

TEST(State, RestartResumesTheRunningGenerationWithItsRanks) {
  ManualClock clock;
  CoordinatorOptions o = Options(2, 2, &clock);
  o.state_dir = std::string(std::getenv("TEST_TMPDIR")) + "/coord_running";
  std::vector<absl::StatusOr<v1::JoinResponse>> g;
  {
    auto core = CoordinatorCore::Create(o);
    ASSERT_TRUE(core.ok()) << core.status();
    g = JoinAll(**core, {"w0", "w1"});
    ASSERT_TRUE(g[0].ok() && g[1].ok());
  }
  auto restarted = CoordinatorCore::Create(o);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  const v1::GetJobStatusResponse s = (*restarted)->GetJobStatus();
  EXPECT_EQ(s.state(), v1::GetJobStatusResponse::RUNNING);
  EXPECT_EQ(s.generation(), 1);
  ASSERT_EQ(s.workers_size(), 2);
  for (const v1::WorkerStatus& w : s.workers()) {
    EXPECT_EQ(w.rank(), w.worker_id() == "w0" ? g[0]->rank() : g[1]->rank());
  }
  EXPECT_EQ(Beat(**restarted, "w0", 1).command(), v1::HeartbeatResponse::CONTINUE);
  EXPECT_EQ(Beat(**restarted, "w1", 1).command(), v1::HeartbeatResponse::CONTINUE);
  // A member silent after the restart is still noticed.
  for (int i = 0; i < 4; ++i) {
    clock.Advance(absl::Milliseconds(900));
    Beat(**restarted, "w0", 1);
  }
  EXPECT_TRUE((*restarted)->CheckLiveness());
  EXPECT_EQ((*restarted)->GetJobStatus().lost(0).worker_id(), "w1");
  // Once the generation has ended, a restart does not resurrect it.
  auto again = CoordinatorCore::Create(o);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->GetJobStatus().state(), v1::GetJobStatusResponse::RUNNING);
}

TEST(KvStore, GetWaitsForSetAndTimesOut) {
  auto core = CoordinatorCore::Create(Options(1, 1));
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE((*core)->Join(JoinReq("w0"), absl::Seconds(5)).ok());
  v1::KvGetRequest get;
  get.set_generation(1);
  get.add_keys("nccl_id");
  get.set_timeout_ms(20000);
  absl::StatusOr<v1::KvGetResponse> got;
  std::thread getter([&] { got = (*core)->KvGet(get); });
  v1::KvSetRequest set;
  set.set_generation(1);
  set.set_key("nccl_id");
  set.set_value(std::string("\x01\x00\x02", 3));
  ASSERT_TRUE((*core)->KvSet(set).ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->values(0), std::string("\x01\x00\x02", 3));

  get.clear_keys();
  get.add_keys("never");
  get.set_timeout_ms(50);
  EXPECT_EQ((*core)->KvGet(get).status().code(), absl::StatusCode::kDeadlineExceeded);

  v1::KvAddRequest add;
  add.set_generation(1);
  add.set_key("barrier");
  add.set_delta(2);
  EXPECT_EQ(*(*core)->KvAdd(add), 2);
  add.set_delta(3);
  EXPECT_EQ(*(*core)->KvAdd(add), 5);
}

TEST(State, RestartContinuesGenerationsAndKeepsCheckpoint) {
  CoordinatorOptions o = Options(1, 1);
  o.state_dir = std::string(std::getenv("TEST_TMPDIR")) + "/coord_state";
  {
    auto core = CoordinatorCore::Create(o);
    ASSERT_TRUE(core.ok()) << core.status();
    ASSERT_TRUE((*core)->Join(JoinReq("w0"), absl::Seconds(5)).ok());
    v1::CommitCheckpointRequest c;
    c.set_generation(1);
    c.mutable_checkpoint()->set_step(120);
    c.mutable_checkpoint()->set_path("/ckpt/step-120");
    c.mutable_checkpoint()->mutable_cursor()->set_epoch(1);
    ASSERT_TRUE((*core)->CommitCheckpoint(c).ok());
    c.mutable_checkpoint()->set_step(100);
    EXPECT_EQ((*core)->CommitCheckpoint(c).code(), absl::StatusCode::kFailedPrecondition);
  }
  auto restarted = CoordinatorCore::Create(o);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  // The running generation carries on through the restart.
  EXPECT_EQ(Beat(**restarted, "w0", 1).command(), v1::HeartbeatResponse::CONTINUE);
  EXPECT_EQ((*restarted)->GetJobStatus().state(), v1::GetJobStatusResponse::RUNNING);
  auto j = (*restarted)->Join(JoinReq("w0"), absl::Seconds(5));
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->generation(), 2);
  EXPECT_EQ(j->resume_from().step(), 120);
  EXPECT_EQ(j->resume_from().cursor().epoch(), 1);

  CoordinatorOptions other = o;
  other.job_id = "other";
  auto refused = CoordinatorCore::Create(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(WriteFileAtomically(o.state_dir + "/coordinator_state.pb", "\xff\xff garbage").ok());
  EXPECT_EQ(CoordinatorCore::Create(o).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Lifecycle, AllFinishedLeavesFinishTheJob) {
  auto core = CoordinatorCore::Create(Options(2, 2));
  ASSERT_TRUE(core.ok());
  auto g = JoinAll(**core, {"w0", "w1"});
  ASSERT_TRUE(g[0].ok());
  for (const char* id : {"w0", "w1"}) {
    v1::LeaveRequest leave;
    leave.set_worker_id(id);
    leave.set_generation(1);
    leave.set_finished(true);
    ASSERT_TRUE((*core)->Leave(leave).ok());
  }
  EXPECT_EQ((*core)->GetJobStatus().state(), v1::GetJobStatusResponse::FINISHED);
  EXPECT_EQ(Beat(**core, "w0", 1).command(), v1::HeartbeatResponse::STOP);
  EXPECT_EQ((*core)->Join(JoinReq("w9"), absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Lifecycle, StopRequestReachesWorkersAndWakesJoiners) {
  auto core = CoordinatorCore::Create(Options(2, 2));
  ASSERT_TRUE(core.ok());
  absl::StatusOr<v1::JoinResponse> lone;
  std::thread t([&] { lone = (*core)->Join(JoinReq("w0"), absl::Seconds(30)); });
  // Wait until the join is pending (a condition, not a sleep).
  while ((*core)->GetJobStatus().message().rfind("1 of", 0) != 0) std::this_thread::yield();
  (*core)->RequestStop("interrupted");
  t.join();
  EXPECT_EQ(lone.status().code(), absl::StatusCode::kAborted);
}

// --batch_auto: rank 0's reports (throughput, gradient norms at its local
// and the global batch) reach the controller; its choice goes out in every
// heartbeat reply, with the reason, and in the next generation's join.
TEST(DynamicBatch, RankZerosReportsDriveTheGlobalBatchInHeartbeats) {
  CoordinatorOptions o = Options(2, 2);
  o.batch_auto.min_global_batch = 64;
  o.batch_auto.max_global_batch = 4096;
  auto core = CoordinatorCore::Create(o);
  ASSERT_TRUE(core.ok()) << core.status();
  auto joined = JoinAll(**core, {"w0", "w1"});
  std::string rank0 = joined[0]->rank() == 0 ? "w0" : "w1";
  std::string rank1 = rank0 == "w0" ? "w1" : "w0";
  auto report = [&](const std::string& id, int64_t step) {
    v1::HeartbeatRequest r;
    r.set_worker_id(id);
    r.set_generation(1);
    v1::WorkerProgress* p = r.mutable_progress();
    p->set_step(step);
    p->set_global_batch(128);
    p->set_local_batch(64);
    p->set_samples_per_second(10000);
    // |G|^2 = 1 and S = 10,000: a noise scale of 10,000, far above 128.
    p->set_local_grad_sq(1 + 10000.0 / 64);
    p->set_global_grad_sq(1 + 10000.0 / 128);
    auto reply = (*core)->Heartbeat(r);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : v1::HeartbeatResponse();
  };
  EXPECT_EQ(report(rank0, 10).global_batch_size(), 0);  // one report: no decision yet
  // Repeats of one window and rank 1's reports are not new observations.
  EXPECT_EQ(report(rank0, 10).global_batch_size(), 0);
  EXPECT_EQ(report(rank1, 20).global_batch_size(), 0);
  report(rank0, 20);
  const v1::HeartbeatResponse r = report(rank0, 30);
  EXPECT_GT(r.global_batch_size(), 128);  // noisy gradients: a larger batch pays
  EXPECT_LE(r.global_batch_size(), 4096);
  EXPECT_EQ(r.global_batch_size() % 2, 0);  // a multiple of the world
  EXPECT_NE(r.batch_reason().find("noise scale 10000"), std::string::npos) << r.batch_reason();
  EXPECT_EQ(report(rank1, 30).global_batch_size(), r.global_batch_size());
  const BatchDecision d = (*core)->batch_decision();
  EXPECT_NEAR(d.noise_scale, 10000, 1e-6);
  EXPECT_EQ(d.global_batch, r.global_batch_size());
  // Without --batch_auto nothing is decided.
  auto plain = CoordinatorCore::Create(Options(1, 1));
  ASSERT_TRUE(plain.ok());
  auto one = JoinAll(**plain, {"w0"});
  v1::HeartbeatRequest hb;
  hb.set_worker_id("w0");
  hb.set_generation(1);
  hb.mutable_progress()->set_step(5);
  hb.mutable_progress()->set_global_batch(64);
  EXPECT_EQ((*plain)->Heartbeat(hb)->global_batch_size(), 0);
}

v1::ReportShardServerRequest ShardReport(const std::string& id, int64_t lo, int64_t hi,
                                         int64_t bytes) {
  v1::ReportShardServerRequest r;
  r.mutable_job()->set_job_id("job");
  v1::ShardServerStatus* s = r.mutable_server();
  s->set_server_id(id);
  s->set_address(absl::StrCat("127.0.0.1:", 7200 + lo));
  v1::FlatRange* range = s->add_ranges();
  range->set_begin(lo);
  range->set_end(hi);
  s->set_bytes_served(bytes);
  s->set_steps_applied(bytes / 100);
  return r;
}

TEST(ShardServers, LatestReportPerServerIsInTheJobStatus) {
  ManualClock clock;
  auto core = CoordinatorCore::Create(Options(1, 1, &clock));
  ASSERT_TRUE(core.ok());
  EXPECT_EQ((*core)->GetJobStatus().shard_servers_size(), 0);
  ASSERT_TRUE((*core)->ReportShardServer(ShardReport("shard1", 500, 1000, 100)).ok());
  ASSERT_TRUE((*core)->ReportShardServer(ShardReport("shard0", 0, 500, 200)).ok());
  clock.Advance(absl::Seconds(2));
  // A newer report replaces the server's older one.
  ASSERT_TRUE((*core)->ReportShardServer(ShardReport("shard0", 0, 500, 900)).ok());
  const v1::GetJobStatusResponse s = (*core)->GetJobStatus();
  ASSERT_EQ(s.shard_servers_size(), 2);
  EXPECT_EQ(s.shard_servers(0).server_id(), "shard0");  // by id
  EXPECT_EQ(s.shard_servers(0).bytes_served(), 900);
  EXPECT_EQ(s.shard_servers(0).steps_applied(), 9);
  EXPECT_EQ(s.shard_servers(0).ranges(0).end(), 500);
  EXPECT_EQ(s.shard_servers(0).last_report_unix_millis(), absl::ToUnixMillis(clock.Now()));
  EXPECT_EQ(s.shard_servers(1).server_id(), "shard1");
  EXPECT_EQ(s.shard_servers(1).bytes_served(), 100);
  EXPECT_EQ(s.shard_servers(1).last_report_unix_millis(),
            absl::ToUnixMillis(clock.Now() - absl::Seconds(2)));
}

TEST(ShardServers, BadReportsAreRefused) {
  auto core = CoordinatorCore::Create(Options(1, 1));
  ASSERT_TRUE(core.ok());
  v1::ReportShardServerRequest no_id = ShardReport("", 0, 10, 0);
  absl::Status s = (*core)->ReportShardServer(no_id);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("server_id"), std::string::npos) << s;
  v1::ReportShardServerRequest other = ShardReport("shard0", 0, 10, 0);
  other.mutable_job()->set_job_id("other");
  EXPECT_EQ((*core)->ReportShardServer(other).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*core)->GetJobStatus().shard_servers_size(), 0);
}

TEST(Options, BadValuesAreRefused) {
  EXPECT_EQ(CoordinatorCore::Create(Options(0, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto s = CoordinatorCore::Create(Options(3, 2)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("min_workers (3) is greater than max_workers (2)"),
            std::string::npos);
  CoordinatorOptions batch = Options(1, 1);
  batch.batch_auto.min_global_batch = 512;
  batch.batch_auto.max_global_batch = 256;
  s = CoordinatorCore::Create(batch).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MIN <= MAX"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem
