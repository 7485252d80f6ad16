// Confirmed deaths off shared memory (issue 34): a member whose
// Coordinator.Attach call ended (its process's connection closed) is gone
// at once when a peer accused it or its generation failed, and after
// detach_grace alone; an accused member whose attachment is still open
// (alive but slow, or SIGSTOPped) is not evicted by this rule. One process,
// a manual clock; the gRPC side is services/worker:coordinator_attachment_test.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_core.h"
#include "services/coordinator/manual_clock.h"

namespace tandem {
namespace {

// Three members; settle_time so long that a rendezvous forms only when
// every member that may be alive is back (or max_workers).
std::unique_ptr<CoordinatorCore> Core(ManualClock* clock) {
  CoordinatorOptions o;
  o.job_id = "job";
  o.min_workers = 2;
  o.max_workers = 3;
  o.settle_time = absl::Hours(1);
  o.heartbeat_period = absl::Seconds(1);
  o.heartbeat_misses = 3;
  o.detach_grace = absl::Milliseconds(500);
  o.clock = [clock] { return clock->Now(); };
  auto made = CoordinatorCore::Create(o);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

std::string Instance(const std::string& id) { return id + "@pid"; }

v1::AttachRequest Attachment(const std::string& id) {
  v1::AttachRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id(id);
  r.set_instance(Instance(id));
  return r;
}

// Joins `ids` concurrently (each attached first, as a worker does).
std::vector<absl::StatusOr<v1::JoinResponse>> JoinAll(CoordinatorCore& core,
                                                      const std::vector<std::string>& ids) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      v1::JoinRequest r;
      r.mutable_job()->set_job_id("job");
      r.set_worker_id(ids[i]);
      r.set_instance(Instance(ids[i]));
      out[i] = core.Join(r, absl::Seconds(20));
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// w0, w1, w2 attached and in generation 1; returns w2's rank.
int StartThree(CoordinatorCore& core) {
  for (const char* id : {"w0", "w1", "w2"}) EXPECT_TRUE(core.Attach(Attachment(id)).ok());
  auto g = JoinAll(core, {"w0", "w1", "w2"});
  for (const auto& r : g) EXPECT_TRUE(r.ok()) << r.status();
  return g[2].ok() ? g[2]->rank() : -1;
}

v1::ReportFailureRequest Accuse(int peer_rank) {
  v1::ReportFailureRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id("w0");
  r.set_generation(1);
  r.set_rank(0);
  r.set_operation("training step");
  r.set_peer_rank(peer_rank);
  r.set_peer_exited(false);  // a reset connection: no proof of death
  r.set_message("gloo allreduce on rank 0 failed: Connection reset by peer (peer rank 2)");
  return r;
}

v1::HeartbeatResponse Beat(CoordinatorCore& core, const std::string& id) {
  v1::HeartbeatRequest r;
  r.mutable_job()->set_job_id("job");
  r.set_worker_id(id);
  r.set_generation(1);
  auto reply = core.Heartbeat(r);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *reply : v1::HeartbeatResponse();
}

// The survivors w0 and w1 form generation 2 on their own (no settle time:
// w2 is not waited for).
void ExpectSurvivorsFormTwo(CoordinatorCore& core) {
  auto g2 = JoinAll(core, {"w0", "w1"});
  ASSERT_TRUE(g2[0].ok()) << g2[0].status();
  ASSERT_TRUE(g2[1].ok()) << g2[1].status();
  EXPECT_EQ(g2[0]->generation(), 2);
  EXPECT_EQ(g2[0]->world_size(), 2);
}

TEST(AttachConfirms, AnAccusedRankWhoseAttachmentClosedIsEvictedAtOnce) {
  ManualClock clock;
  auto core = Core(&clock);
  const int w2 = StartThree(*core);
  core->Detach(Attachment("w2"));  // its process died: the kernel closed its socket
  // The clock never moves: no heartbeat missed, no grace passed.
  ASSERT_TRUE(core->ReportFailure(Accuse(w2)).ok());
  const v1::HeartbeatResponse hb = Beat(*core, "w1");
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_TRUE(hb.failure());
  EXPECT_TRUE(absl::StrContains(hb.reason(),
                                "(w2) exited (confirmed: its connection to the coordinator "
                                "closed; rank 0 reported: training step failed)"))
      << hb.reason();
  EXPECT_EQ(core->GetJobStatus().lost_size(), 0);  // gone, nothing for a supervisor to kill
  ExpectSurvivorsFormTwo(*core);
}

TEST(AttachConfirms, AnAttachmentClosingAfterTheAccusationEvictsAtOnceToo) {
  ManualClock clock;
  auto core = Core(&clock);
  const int w2 = StartThree(*core);
  // The survivor's TCP error can reach the coordinator before the dead
  // process's closed connection does.
  ASSERT_TRUE(core->ReportFailure(Accuse(w2)).ok());
  core->Detach(Attachment("w2"));
  const v1::HeartbeatResponse hb = Beat(*core, "w1");
  EXPECT_TRUE(absl::StrContains(hb.reason(), "(w2) exited (confirmed: its connection"))
      << hb.reason();
  ExpectSurvivorsFormTwo(*core);
}

TEST(AttachConfirms, AnAccusedRankThatIsStillAttachedIsNotEvicted) {
  ManualClock clock;
  auto core = Core(&clock);
  const int w2 = StartThree(*core);
  // w2 is stopped (SIGSTOP) or slow: its connection stays open.
  ASSERT_TRUE(core->ReportFailure(Accuse(w2)).ok());
  EXPECT_EQ(Beat(*core, "w1").command(), v1::HeartbeatResponse::REJOIN);
  clock.Advance(absl::Seconds(1));  // past the grace, inside the heartbeat tolerance
  EXPECT_FALSE(core->CheckLiveness());
  EXPECT_FALSE(absl::StrContains(Beat(*core, "w1").reason(), "confirmed")) << "w2 evicted";
  std::vector<absl::StatusOr<v1::JoinResponse>> survivors;
  std::thread rejoin([&] { survivors = JoinAll(*core, {"w0", "w1"}); });
  // The survivors wait for w2 (the rendezvous's message says 2 are in) ...
  while (!absl::StartsWith(core->GetJobStatus().message(), "2 of min 2 ")) {
    std::this_thread::yield();
  }
  // ... and it comes back: all three form generation 2.
  auto slow = JoinAll(*core, {"w2"});
  rejoin.join();
  ASSERT_TRUE(slow[0].ok()) << slow[0].status();
  EXPECT_EQ(slow[0]->world_size(), 3);
  ASSERT_TRUE(survivors[0].ok() && survivors[1].ok());
  EXPECT_EQ(survivors[0]->world_size(), 3);
}

TEST(AttachConfirms, AClosedAttachmentAloneEndsTheGenerationAfterTheGrace) {
  ManualClock clock;
  auto core = Core(&clock);
  StartThree(*core);
  // w2 died between collectives: nobody accuses it.
  core->Detach(Attachment("w2"));
  EXPECT_EQ(Beat(*core, "w1").command(), v1::HeartbeatResponse::CONTINUE);
  clock.Advance(absl::Milliseconds(250));
  EXPECT_FALSE(core->CheckLiveness());
  clock.Advance(absl::Milliseconds(250));
  ASSERT_TRUE(core->CheckLiveness());
  const v1::HeartbeatResponse hb = Beat(*core, "w1");
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_TRUE(hb.failure());
  EXPECT_TRUE(absl::StrContains(hb.reason(),
                                "(w2) exited (confirmed: its connection to the coordinator "
                                "closed 500ms ago)"))
      << hb.reason();
  ExpectSurvivorsFormTwo(*core);
}

TEST(AttachConfirms, AReattachWithinTheGraceIsNoDeath) {
  ManualClock clock;
  auto core = Core(&clock);
  StartThree(*core);
  // A connection reset while the process lives: it attaches again.
  core->Detach(Attachment("w2"));
  ASSERT_TRUE(core->Attach(Attachment("w2")).ok());
  clock.Advance(absl::Seconds(1));
  for (const char* id : {"w0", "w1", "w2"}) Beat(*core, id);
  EXPECT_FALSE(core->CheckLiveness());
  EXPECT_EQ(Beat(*core, "w1").command(), v1::HeartbeatResponse::CONTINUE);
}

TEST(AttachConfirms, AnotherProcessOrALeftMemberIsNotJudged) {
  ManualClock clock;
  auto core = Core(&clock);
  StartThree(*core);
  // An older process of w1's worker id: not the member.
  v1::AttachRequest stale = Attachment("w1");
  stale.set_instance("w1@old");
  core->Detach(stale);
  // w0 left cleanly, then its attachment closed.
  v1::LeaveRequest leave;
  leave.mutable_job()->set_job_id("job");
  leave.set_worker_id("w0");
  leave.set_generation(1);
  leave.set_finished(true);
  ASSERT_TRUE(core->Leave(leave).ok());
  core->Detach(Attachment("w0"));
  clock.Advance(absl::Seconds(1));
  for (const char* id : {"w1", "w2"}) Beat(*core, id);
  EXPECT_FALSE(core->CheckLiveness());
  EXPECT_EQ(Beat(*core, "w1").command(), v1::HeartbeatResponse::CONTINUE);
}

TEST(AttachConfirms, AJoinerWhoseAttachmentClosedLeavesTheRendezvous) {
  ManualClock clock;
  auto core = Core(&clock);
  ASSERT_TRUE(core->Attach(Attachment("w0")).ok());
  std::vector<absl::StatusOr<v1::JoinResponse>> joined;
  std::thread join([&] { joined = JoinAll(*core, {"w0"}); });
  while (!absl::StartsWith(core->GetJobStatus().message(), "1 of min 2 ")) {
    std::this_thread::yield();
  }
  core->Detach(Attachment("w0"));  // died while waiting: it is not coming
  join.join();
  EXPECT_EQ(joined[0].status().code(), absl::StatusCode::kAborted) << joined[0].status();
  EXPECT_TRUE(absl::StartsWith(core->GetJobStatus().message(), "0 of min 2 "))
      << core->GetJobStatus().message();
}

TEST(AttachConfirms, AnAttachmentNeedsAWorkerAndAnInstance) {
  ManualClock clock;
  auto core = Core(&clock);
  v1::AttachRequest r = Attachment("w0");
  r.clear_instance();
  absl::StatusOr<int64_t> got = core->Attach(r);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "instance")) << got.status();
}

}  // namespace
}  // namespace tandem
