// CoordinatorCore's judgement of silence and of restarts (issue 28): a gap
// in its own liveness checks blames nobody; a member's tolerance grows with
// the step time it reports; after a restart from the state directory, a
// worker of a new job incarnation resumes the job from its checkpoint
// instead of being refused as a duplicate of the stored generation.
// Issue 34: a rank reported as exited by a peer is lost at once, without
// waiting for its heartbeats, and the rendezvous after it forms as soon as
// every member still alive is back; a rank reported without that evidence
// (slow, not dead) is not removed.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/coordinator/manual_clock.h"
#include "services/coordinator/coordinator_core.h"

namespace tandem {
namespace {

CoordinatorOptions Options(ManualClock* clock, const std::string& state = "") {
  CoordinatorOptions o;
  o.job_id = "job";
  o.min_workers = 2;
  o.max_workers = 2;
  o.settle_time = absl::Milliseconds(100);
  o.heartbeat_period = absl::Seconds(1);
  o.heartbeat_misses = 3;
  o.stall_gap = absl::Seconds(1);
  o.clock = [clock] { return clock->Now(); };
  if (!state.empty()) o.state_dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + state;
  return o;
}

v1::JoinRequest Req(const std::string& id, const std::string& incarnation) {
  v1::JoinRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id(id);
  r.set_instance(id + "@" + incarnation);  // one process per (worker, run)
  r.set_incarnation(incarnation);
  return r;
}

std::vector<absl::StatusOr<v1::JoinResponse>> JoinBoth(CoordinatorCore& core,
                                                       const std::string& incarnation) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(2);
  std::thread a([&] { out[0] = core.Join(Req("w0", incarnation), absl::Seconds(20)); });
  std::thread b([&] { out[1] = core.Join(Req("w1", incarnation), absl::Seconds(20)); });
  a.join();
  b.join();
  return out;
}

v1::HeartbeatResponse Beat(CoordinatorCore& core, const std::string& id, int64_t gen,
                           double step_seconds = 0) {
  v1::HeartbeatRequest r;
  r.set_worker_id(id);
  r.set_generation(gen);
  r.mutable_progress()->set_step(7);
  r.mutable_progress()->set_step_seconds(step_seconds);
  auto reply = core.Heartbeat(r);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *reply : v1::HeartbeatResponse();
}

// Ticks the liveness check every 250 ms of the manual clock while w0 keeps
// beating; returns how long until the generation ended (or `limit`).
absl::Duration TicksUntilEnded(CoordinatorCore& core, ManualClock& clock, absl::Duration limit,
                               double w0_step_seconds = 0) {
  absl::Duration waited;
  while (waited < limit) {
    clock.Advance(absl::Milliseconds(250));
    waited += absl::Milliseconds(250);
    Beat(core, "w0", 1, w0_step_seconds);
    if (core.CheckLiveness()) return waited;
  }
  return limit;
}

TEST(ClockGap, AStalledCoordinatorBlamesNobodyAndStillNamesARealHang) {
  ManualClock clock;
  auto core = CoordinatorCore::Create(Options(&clock));
  ASSERT_TRUE(core.ok()) << core.status();
  auto g = JoinBoth(**core, "");
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  EXPECT_FALSE((*core)->CheckLiveness());
  // 12 s in which the coordinator itself did not run (SIGSTOP): every
  // member looks silent, but the silence was the coordinator's.
  clock.Advance(absl::Seconds(12));
  EXPECT_FALSE((*core)->CheckLiveness());
  EXPECT_EQ((*core)->stalls(), 1);
  EXPECT_EQ((*core)->GetJobStatus().state(), v1::GetJobStatusResponse::RUNNING);
  EXPECT_EQ(Beat(**core, "w1", 1).command(), v1::HeartbeatResponse::CONTINUE);
  // A worker that really hangs (w1 from here on) is still named, after the
  // ordinary tolerance of 3 heartbeats, counted from the stall's end.
  const absl::Duration took = TicksUntilEnded(**core, clock, absl::Seconds(10));
  EXPECT_GT(took, absl::Seconds(3));
  EXPECT_LE(took, absl::Seconds(3.25));
  const v1::GetJobStatusResponse s = (*core)->GetJobStatus();
  ASSERT_EQ(s.lost_size(), 1);
  EXPECT_EQ(s.lost(0).worker_id(), "w1");
  EXPECT_TRUE(absl::StrContains(s.lost(0).reason(), "missed 3 heartbeats")) << s.lost(0).reason();
  EXPECT_EQ((*core)->stalls(), 1);
}

TEST(ClockGap, OffWhenNotConfigured) {
  ManualClock clock;
  CoordinatorOptions o = Options(&clock);
  o.stall_gap = absl::ZeroDuration();
  auto core = CoordinatorCore::Create(o);
  ASSERT_TRUE(core.ok());
  auto g = JoinBoth(**core, "");
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  EXPECT_FALSE((*core)->CheckLiveness());
  clock.Advance(absl::Seconds(12));
  EXPECT_TRUE((*core)->CheckLiveness());
  EXPECT_EQ((*core)->stalls(), 0);
}

TEST(Tolerance, GrowsWithTheReportedStepTime) {
  ManualClock clock;
  auto core = CoordinatorCore::Create(Options(&clock));
  ASSERT_TRUE(core.ok());
  auto g = JoinBoth(**core, "");
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  // w1's steps take 2 s on this machine: 5 x 2 s = 10 s of silence allowed.
  Beat(**core, "w1", 1, /*step_seconds=*/2.0);
  EXPECT_FALSE((*core)->CheckLiveness());
  const absl::Duration took = TicksUntilEnded(**core, clock, absl::Seconds(20));
  EXPECT_GT(took, absl::Seconds(10));
  EXPECT_LE(took, absl::Seconds(10.25));
  const v1::GetJobStatusResponse s = (*core)->GetJobStatus();
  ASSERT_EQ(s.lost_size(), 1);
  EXPECT_TRUE(absl::StrContains(s.lost(0).reason(), "tolerance 10s for its step time"))
      << s.lost(0).reason();
}

// Commits a checkpoint at `step` in generation 1 and drops the core (the
// process is gone, e.g. Ctrl-C of the whole job).
void RunFirstIncarnation(const CoordinatorOptions& o, const std::string& incarnation) {
  auto core = CoordinatorCore::Create(o);
  ASSERT_TRUE(core.ok()) << core.status();
  auto g = JoinBoth(**core, incarnation);
  ASSERT_TRUE(g[0].ok() && g[1].ok());
  v1::CommitCheckpointRequest c;
  c.set_generation(1);
  c.mutable_checkpoint()->set_step(300);
  c.mutable_checkpoint()->set_path("/ckpt/step-300");
  c.mutable_checkpoint()->mutable_cursor()->set_samples_in_epoch(19200);
  ASSERT_TRUE((*core)->CommitCheckpoint(c).ok());
}

TEST(Incarnation, ANewRunResumesFromTheCheckpointInsteadOfBeingRefused) {
  ManualClock clock;
  const CoordinatorOptions o = Options(&clock, "incarnation_new_run");
  RunFirstIncarnation(o, "run-1");
  auto again = CoordinatorCore::Create(o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->GetJobStatus().state(), v1::GetJobStatusResponse::RUNNING);
  // The same command again: new processes, a new incarnation.
  auto g = JoinBoth(**again, "run-2");
  ASSERT_TRUE(g[0].ok()) << g[0].status();
  ASSERT_TRUE(g[1].ok()) << g[1].status();
  EXPECT_EQ(g[0]->generation(), 2);
  EXPECT_EQ(g[0]->resume_from().step(), 300);
  EXPECT_EQ(g[0]->resume_from().cursor().samples_in_epoch(), 19200);
  EXPECT_EQ((*again)->restarts(), 0) << "a new run is not a failure";
  EXPECT_EQ((*again)->GetJobStatus().lost_size(), 0);
}

TEST(Incarnation, RestoredMembersThatHeartbeatAreStillProtectedFromDuplicates) {
  ManualClock clock;
  const CoordinatorOptions o = Options(&clock, "incarnation_live");
  RunFirstIncarnation(o, "run-1");
  auto again = CoordinatorCore::Create(o);
  ASSERT_TRUE(again.ok()) << again.status();
  // The old processes are alive (only the coordinator restarted).
  EXPECT_EQ(Beat(**again, "w0", 1).command(), v1::HeartbeatResponse::CONTINUE);
  EXPECT_EQ(Beat(**again, "w1", 1).command(), v1::HeartbeatResponse::CONTINUE);
  auto refused = (*again)->Join(Req("w0", "run-2"), absl::Seconds(5));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
  EXPECT_EQ(Beat(**again, "w0", 1).command(), v1::HeartbeatResponse::CONTINUE);
}

TEST(Incarnation, WithoutIncarnationsAnUnconfirmedMemberIsNoDuplicate) {
  ManualClock clock;
  const CoordinatorOptions o = Options(&clock, "incarnation_unknown");
  RunFirstIncarnation(o, "");
  auto again = CoordinatorCore::Create(o);
  ASSERT_TRUE(again.ok()) << again.status();
  auto g = JoinBoth(**again, "");
  ASSERT_TRUE(g[0].ok()) << g[0].status();
  ASSERT_TRUE(g[1].ok()) << g[1].status();
  EXPECT_EQ(g[1]->resume_from().step(), 300);
}

// Three members in generation 1; settle_time so long that a rendezvous can
// only form by max_workers or by every live member being back.
CoordinatorOptions ThreeOptions(ManualClock* clock) {
  CoordinatorOptions o = Options(clock);
  o.min_workers = 2;
  o.max_workers = 3;
  o.settle_time = absl::Hours(1);
  return o;
}

// Joins `ids` concurrently; the replies in the same order.
std::vector<absl::StatusOr<v1::JoinResponse>> JoinAll(CoordinatorCore& core,
                                                      const std::vector<std::string>& ids) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = core.Join(Req(ids[i], ""), absl::Seconds(20)); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// Generation 1 of w0, w1, w2 under ThreeOptions.
void StartThree(ManualClock* clock, std::unique_ptr<CoordinatorCore>* core,
                std::vector<absl::StatusOr<v1::JoinResponse>>* g) {
  auto made = CoordinatorCore::Create(ThreeOptions(clock));
  ASSERT_TRUE(made.ok()) << made.status();
  *core = std::move(*made);
  *g = JoinAll(**core, {"w0", "w1", "w2"});
  ASSERT_TRUE((*g)[0].ok() && (*g)[1].ok() && (*g)[2].ok());
}

int RankOf(const std::vector<absl::StatusOr<v1::JoinResponse>>& g, int i) {
  return g[i].ok() ? g[i]->rank() : -1;
}

v1::ReportFailureRequest Report(const std::string& from, int rank, int peer, bool exited) {
  v1::ReportFailureRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id(from);
  r.set_generation(1);
  r.set_rank(rank);
  r.set_operation("training step");
  r.set_peer_rank(peer);
  r.set_peer_exited(exited);
  r.set_message("shm allreduce on rank 0: rank 2 (pid 1) exited");
  return r;
}

TEST(ReportedExit, TheExitedRankIsLostAtOnceAndTheRendezvousGoesOnWithoutIt) {
  ManualClock clock;
  std::unique_ptr<CoordinatorCore> core;
  std::vector<absl::StatusOr<v1::JoinResponse>> g;
  ASSERT_NO_FATAL_FAILURE(StartThree(&clock, &core, &g));
  // The clock never moves: no heartbeat was missed when the report came.
  ASSERT_TRUE(core->ReportFailure(Report("w0", RankOf(g, 0), RankOf(g, 2), true)).ok());
  const v1::HeartbeatResponse hb = Beat(*core, "w1", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_TRUE(hb.failure());
  EXPECT_TRUE(absl::StrContains(hb.reason(), "(w2) exited (seen by rank ")) << hb.reason();
  // Not listed as lost (that list is for a supervisor to kill: expelled,
  // maybe hung); the process is gone already.
  EXPECT_EQ(core->GetJobStatus().lost_size(), 0);
  EXPECT_FALSE(core->CheckLiveness());
  // The survivors alone form generation 2: no settle_time, no w2.
  auto g2 = JoinAll(*core, {"w0", "w1"});
  ASSERT_TRUE(g2[0].ok()) << g2[0].status();
  ASSERT_TRUE(g2[1].ok()) << g2[1].status();
  EXPECT_EQ(g2[0]->generation(), 2);
  EXPECT_EQ(g2[0]->world_size(), 2);
  EXPECT_EQ(core->restarts(), 1);
}

TEST(ReportedExit, AReportWithoutEvidenceOfAnExitRemovesNobody) {
  ManualClock clock;
  std::unique_ptr<CoordinatorCore> core;
  std::vector<absl::StatusOr<v1::JoinResponse>> g;
  ASSERT_NO_FATAL_FAILURE(StartThree(&clock, &core, &g));
  // w0 blames w2 (a timeout, a reset connection), but w2 is only slow.
  ASSERT_TRUE(core->ReportFailure(Report("w0", RankOf(g, 0), RankOf(g, 2), false)).ok());
  EXPECT_EQ(Beat(*core, "w1", 1).command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_EQ(core->GetJobStatus().lost_size(), 0);
  std::vector<absl::StatusOr<v1::JoinResponse>> survivors;
  std::thread rejoin([&] { survivors = JoinAll(*core, {"w0", "w1"}); });
  // Both survivors wait in the rendezvous (for w2, not for settle_time) ...
  while (!absl::StartsWith(core->GetJobStatus().message(), "2 of min 2 ")) {
    std::this_thread::yield();
  }
  // ... until the slow rank comes back: all three form generation 2.
  auto slow = core->Join(Req("w2", ""), absl::Seconds(20));
  rejoin.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(survivors[0].ok() && survivors[1].ok());
  for (const auto& r : {*survivors[0], *survivors[1], *slow}) {
    EXPECT_EQ(r.generation(), 2);
    EXPECT_EQ(r.world_size(), 3);
  }
}

TEST(ReportedExit, AnExitReportForAnotherGenerationOrAFakeRankChangesNothing) {
  ManualClock clock;
  std::unique_ptr<CoordinatorCore> core;
  std::vector<absl::StatusOr<v1::JoinResponse>> g;
  ASSERT_NO_FATAL_FAILURE(StartThree(&clock, &core, &g));
  v1::ReportFailureRequest stale = Report("w0", RankOf(g, 0), RankOf(g, 2), true);
  stale.set_generation(0);
  ASSERT_TRUE(core->ReportFailure(stale).ok());
  ASSERT_TRUE(core->ReportFailure(Report("w0", RankOf(g, 0), 7, true)).ok());
  // The second report (current generation) ends it, but names no member.
  EXPECT_EQ(Beat(*core, "w1", 1).command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_EQ(core->GetJobStatus().lost_size(), 0);
}

TEST(ReportedExit, AnExpelledRankIsNotWaitedForEither) {
  ManualClock clock;
  std::unique_ptr<CoordinatorCore> core;
  std::vector<absl::StatusOr<v1::JoinResponse>> g;
  ASSERT_NO_FATAL_FAILURE(StartThree(&clock, &core, &g));
  // w2 hangs (SIGSTOP): w0 and w1 keep beating until it is expelled.
  bool ended = false;
  for (int tick = 0; tick < 20 && !ended; ++tick) {
    clock.Advance(absl::Milliseconds(250));
    Beat(*core, "w0", 1);
    Beat(*core, "w1", 1);
    ended = core->CheckLiveness();
  }
  ASSERT_TRUE(ended);
  ASSERT_EQ(core->GetJobStatus().lost_size(), 1);
  auto g2 = JoinAll(*core, {"w0", "w1"});
  ASSERT_TRUE(g2[0].ok() && g2[1].ok());
  EXPECT_EQ(g2[0]->world_size(), 2);
}

}  // namespace
}  // namespace tandem
