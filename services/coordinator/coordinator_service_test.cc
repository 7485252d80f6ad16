// Coordinator.Attach on gRPC's callback API, over a real server bound to
// port 0 whose sync thread pool is capped: open Attach calls hold no server
// thread (a unary call still answers while 64 are open; a sync handler per
// call would exhaust the pool), a cancelled call detaches exactly once, and
// Stop() ends every call without counting it as a detach; a call without
// the job's token is refused.
#include "services/coordinator/coordinator_service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/auth.h"
#include "gtest/gtest.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tandem {
namespace {

constexpr int kSyncThreads = 4;  // the server's whole sync thread budget

// One open Attach call from the client's side.
struct OpenCall {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::AttachResponse>> reader;
};

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.job_id = "job";
    o.min_workers = 2;
    o.max_workers = 2;
    o.settle_time = absl::ZeroDuration();
    o.heartbeat_period = absl::Seconds(60);  // only the attachment can tell
    o.detach_grace = absl::ZeroDuration();   // a closed attachment confirms at once
    auto core = CoordinatorCore::Create(o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    service_ = std::make_unique<CoordinatorService>(core_.get(), absl::Seconds(20), Token());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    grpc::ResourceQuota quota("coordinator-service-test");
    quota.SetMaxThreads(kSyncThreads);
    builder.SetResourceQuota(quota);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                         grpc::InsecureChannelCredentials()));
  }

  virtual std::string Token() const { return ""; }

  void TearDown() override {
    if (service_) service_->Stop();
    if (server_) server_->Shutdown();
  }

  static v1::AttachRequest Request(const std::string& id) {
    v1::AttachRequest r;
    r.mutable_job()->set_job_id("job");
    r.set_worker_id(id);
    r.set_instance(id + "@pid");
    return r;
  }

  // Opens an Attach call for `id` and reads its registration reply.
  std::unique_ptr<OpenCall> Open(const std::string& id) {
    auto call = std::make_unique<OpenCall>();
    call->reader = stub_->Attach(&call->ctx, Request(id));
    v1::AttachResponse reply;
    EXPECT_TRUE(call->reader->Read(&reply)) << "attach " << id << ": "
                                            << call->reader->Finish().error_message();
    return call;
  }

  // Members "a" and "b" in generation 1.
  void FormGeneration() {
    std::vector<std::thread> joins;
    for (const char* id : {"a", "b"}) {
      joins.emplace_back([this, id] {
        v1::JoinRequest r;
        r.mutable_job()->set_job_id("job");
        r.set_worker_id(id);
        r.set_instance(absl::StrCat(id, "@pid"));
        auto joined = core_->Join(r, absl::Seconds(20));
        EXPECT_TRUE(joined.ok()) << joined.status();
      });
    }
    for (std::thread& t : joins) t.join();
  }

  // What the coordinator tells member "a" now.
  v1::HeartbeatResponse BeatA() {
    v1::HeartbeatRequest r;
    r.mutable_job()->set_job_id("job");
    r.set_worker_id("a");
    r.set_generation(1);
    auto reply = core_->Heartbeat(r);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : v1::HeartbeatResponse();
  }

  // Waits (up to 20 s) until the service holds `n` Attach calls.
  bool WaitForOpenCalls(int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (service_->open_attach_calls() != n) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, not a sync
    }
    return true;
  }

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(CoordinatorServiceTest, OpenAttachCallsHoldNoServerThread) {
  constexpr int kCalls = 64;  // 16x the sync thread budget
  std::vector<std::unique_ptr<OpenCall>> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(Open(absl::StrCat("w", i)));
  EXPECT_EQ(service_->open_attach_calls(), kCalls);
  // A unary (sync) call still gets a thread.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::GetJobStatusRequest req;
  v1::GetJobStatusResponse resp;
  const grpc::Status status = stub_->GetJobStatus(&ctx, req, &resp);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  for (auto& call : calls) call->ctx.TryCancel();
  for (auto& call : calls) EXPECT_EQ(call->reader->Finish().error_code(), grpc::CANCELLED);
  EXPECT_TRUE(WaitForOpenCalls(0));
}

TEST_F(CoordinatorServiceTest, ACancelledCallDetachesOnce) {
  FormGeneration();
  // b's process holds two calls (a re-attach overlapping the old call).
  std::unique_ptr<OpenCall> first = Open("b");
  std::unique_ptr<OpenCall> second = Open("b");
  first->ctx.TryCancel();
  EXPECT_EQ(first->reader->Finish().error_code(), grpc::CANCELLED);
  ASSERT_TRUE(WaitForOpenCalls(1));
  // One call still open: a second Detach for the first would have closed b.
  EXPECT_EQ(BeatA().command(), v1::HeartbeatResponse::CONTINUE);
  second.reset();  // the client goes without cancelling: its connection ends
  ASSERT_TRUE(WaitForOpenCalls(0));
  const v1::HeartbeatResponse hb = BeatA();
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::REJOIN);
  EXPECT_TRUE(absl::StrContains(hb.reason(), "(b) exited (confirmed: its connection"))
      << hb.reason();
}

TEST_F(CoordinatorServiceTest, StopEndsEveryCallWithoutADetach) {
  FormGeneration();
  std::unique_ptr<OpenCall> b = Open("b");
  service_->Stop();
  v1::AttachResponse reply;
  EXPECT_FALSE(b->reader->Read(&reply));
  const grpc::Status ended = b->reader->Finish();
  EXPECT_EQ(ended.error_code(), grpc::UNAVAILABLE) << ended.error_message();
  ASSERT_TRUE(WaitForOpenCalls(0));
  EXPECT_EQ(BeatA().command(), v1::HeartbeatResponse::CONTINUE);  // b not judged by it
  // A call after Stop() ends at once.
  grpc::ClientContext ctx;
  auto late = stub_->Attach(&ctx, Request("b"));
  EXPECT_FALSE(late->Read(&reply));
  EXPECT_EQ(late->Finish().error_code(), grpc::UNAVAILABLE);
}

TEST_F(CoordinatorServiceTest, ARefusedCallEndsWithTheCoreError) {
  grpc::ClientContext ctx;
  v1::AttachRequest no_instance = Request("b");
  no_instance.clear_instance();
  auto call = stub_->Attach(&ctx, no_instance);
  v1::AttachResponse reply;
  EXPECT_FALSE(call->Read(&reply));
  const grpc::Status status = call->Finish();
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "instance")) << status.error_message();
  EXPECT_TRUE(WaitForOpenCalls(0));
}

class TokenCoordinatorServiceTest : public CoordinatorServiceTest {
 protected:
  std::string Token() const override { return "job-token"; }
};

TEST_F(TokenCoordinatorServiceTest, AnAttachWithoutTheTokenIsRefusedAndOneWithItRegisters) {
  grpc::ClientContext ctx;
  auto refused = stub_->Attach(&ctx, Request("b"));
  v1::AttachResponse reply;
  EXPECT_FALSE(refused->Read(&reply));
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::UNAUTHENTICATED) << status.error_message();
  ASSERT_TRUE(WaitForOpenCalls(0));
  grpc::ClientContext with_token;
  with_token.AddMetadata(kAuthTokenMetadataKey, "job-token");
  auto registered = stub_->Attach(&with_token, Request("b"));
  EXPECT_TRUE(registered->Read(&reply));
  with_token.TryCancel();
  EXPECT_EQ(registered->Finish().error_code(), grpc::CANCELLED);
}

}  // namespace
}  // namespace tandem
