// CoordinatorAttachment over a real in-process CoordinatorServer (port 0):
// a client gone without Leave (its attachment's call ends, as when the
// process dies) is confirmed gone by the coordinator without missed
// heartbeats; one that left first is not judged by it.
#include "services/worker/coordinator_attachment.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_server.h"
#include "services/worker/coordinator_client.h"

namespace tandem {
namespace worker {
namespace {

class CoordinatorAttachmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorServerOptions o;
    o.coordinator.job_id = "attach-test";
    o.coordinator.min_workers = 2;
    o.coordinator.max_workers = 2;
    o.coordinator.settle_time = absl::ZeroDuration();
    // Heartbeats would take minutes to miss: only the attachment can tell.
    o.coordinator.heartbeat_period = absl::Seconds(60);
    o.coordinator.detach_grace = absl::ZeroDuration();
    o.run_liveness_thread = false;
    auto server = CoordinatorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    a_ = Client("a");
    b_ = Client("b");
    std::thread ja([&] { ASSERT_TRUE(a_->Join().ok()); });
    std::thread jb([&] { ASSERT_TRUE(b_->Join().ok()); });
    ja.join();
    jb.join();
  }

  std::unique_ptr<CoordinatorClient> Client(const std::string& id) {
    CoordinatorClientOptions o;
    o.target = absl::StrCat("127.0.0.1:", server_->port());
    o.job_id = "attach-test";
    o.worker_id = id;
    auto c = CoordinatorClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  // a's heartbeat reply until it is no longer CONTINUE (or 30 s).
  Command WaitForCommand() {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      EXPECT_TRUE(a_->HeartbeatOnce().ok());
      if (a_->command().kind != Command::kContinue) break;
      absl::SleepFor(absl::Milliseconds(10));  // polling a condition, not a sync
    }
    return a_->command();
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<CoordinatorClient> a_, b_;
};

TEST_F(CoordinatorAttachmentTest, AClientGoneWithoutLeaveIsConfirmedGone) {
  b_.reset();  // no Leave: what a crashed worker does (its call ends)
  const Command c = WaitForCommand();
  EXPECT_EQ(c.kind, Command::kRejoin);
  EXPECT_TRUE(absl::StrContains(c.reason, "(b) exited (confirmed: its connection to the "
                                          "coordinator closed"))
      << c.reason;
  EXPECT_EQ(server_->core().GetJobStatus().lost_size(), 0);
}

TEST_F(CoordinatorAttachmentTest, AClientThatLeftIsNotJudgedByItsAttachment) {
  ASSERT_TRUE(b_->Leave(/*finished=*/true).ok());
  b_.reset();
  ASSERT_TRUE(a_->Leave(/*finished=*/true).ok());
  // Both finished: the job ends as finished, not with b lost.
  const v1::GetJobStatusResponse s = server_->core().GetJobStatus();
  EXPECT_FALSE(absl::StrContains(s.message(), "exited")) << s.message();
  EXPECT_EQ(s.state(), v1::GetJobStatusResponse::FINISHED) << s.message();
}

// Registered once; its destructor cancels the open call and returns.
TEST(CoordinatorAttachment, IsRegisteredOnceAndClosesOnDestruction) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "attach-test";
  o.run_liveness_thread = false;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Coordinator::NewStub(
      MakeChannel({.target = absl::StrCat("127.0.0.1:", (*server)->port())}));
  v1::AttachRequest r;
  r.mutable_job()->set_job_id("attach-test");
  r.set_worker_id("a");
  r.set_instance("a@1");
  auto attachment = std::make_unique<CoordinatorAttachment>(stub.get(), r);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (attachment->registrations() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(attachment->registrations(), 1);
  attachment.reset();
}

}  // namespace
}  // namespace worker
}  // namespace tandem
