// gRPC round trips on port 0 through RpcServer, MakeChannel and CallWithRetry.
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "common/rpc/auth.h"
#include "common/rpc/channel.h"
#include "common/rpc/echo_test.grpc.pb.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/server.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using tandem::testing::Echo;
using tandem::testing::EchoReply;
using tandem::testing::EchoRequest;

class EchoService final : public Echo::Service {
 public:
  grpc::Status Say(grpc::ServerContext* ctx, const EchoRequest* req, EchoReply* reply) override {
    if (grpc::Status s = CheckCallToken(*ctx, token); !s.ok()) return s;
    int n = ++calls_;
    if (req->fail_code() != 0 && n <= req->fail_times()) {
      return grpc::Status(static_cast<grpc::StatusCode>(req->fail_code()), "injected");
    }
    reply->set_text(req->text());
    reply->set_calls(n);
    return grpc::Status::OK;
  }
  std::atomic<int> calls_{0};
  std::string token;  // "" = no check
};

RetryOptions FastRetry() {
  RetryOptions r;
  r.initial_backoff = absl::Milliseconds(1);
  r.max_backoff = absl::Milliseconds(4);
  r.call_timeout = absl::Seconds(5);
  return r;
}

TEST(Rpc, RoundTripOnPortZero) {
  EchoService service;
  auto server = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address()}));
  EchoRequest req;
  req.set_text("hello tandem");
  EchoReply reply;
  absl::Status s = CallWithRetry(FastRetry(), "Echo.Say", [&](grpc::ClientContext* ctx) {
    return stub->Say(ctx, req, &reply);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(reply.text(), req.text());
}

TEST(Rpc, LargeMessagesPassTheRaisedLimit) {
  EchoService service;
  auto server = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address()}));
  EchoRequest req;
  req.set_text(std::string(16 << 20, 'y'));  // 16 MB: over gRPC's 4 MB default
  EchoReply reply;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Say(&ctx, req, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.text().size(), req.text().size());
}

TEST(Rpc, RetriesUnavailableThenSucceeds) {
  EchoService service;
  auto server = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(server.ok());
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address()}));
  EchoRequest req;
  req.set_text("hi");
  req.set_fail_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  req.set_fail_times(2);
  EchoReply reply;
  absl::Status s = CallWithRetry(FastRetry(), "Echo.Say", [&](grpc::ClientContext* ctx) {
    return stub->Say(ctx, req, &reply);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(reply.calls(), 3);
}

TEST(Rpc, DoesNotRetryNonRetryableAndNamesTheCall) {
  EchoService service;
  auto server = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(server.ok());
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address()}));
  EchoRequest req;
  req.set_fail_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  req.set_fail_times(100);
  EchoReply reply;
  absl::Status s = CallWithRetry(FastRetry(), "Echo.Say", [&](grpc::ClientContext* ctx) {
    return stub->Say(ctx, req, &reply);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("Echo.Say (attempt 1 of 5)"), std::string::npos) << s;
  EXPECT_EQ(service.calls_.load(), 1);
}

TEST(Rpc, GivesUpAfterMaxAttempts) {
  EchoService service;
  auto server = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(server.ok());
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address()}));
  EchoRequest req;
  req.set_fail_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  req.set_fail_times(100);
  EchoReply reply;
  RetryOptions retry = FastRetry();
  retry.max_attempts = 3;
  absl::Status s = CallWithRetry(retry, "Echo.Say", [&](grpc::ClientContext* ctx) {
    return stub->Say(ctx, req, &reply);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service.calls_.load(), 3);
}

TEST(Rpc, OccupiedPortIsAClearError) {
  EchoService service;
  auto first = RpcServer::Start(ServerOptions{}, {&service});
  ASSERT_TRUE(first.ok());
  ServerOptions taken;
  taken.port = (*first)->port();
  EchoService other;
  auto second = RpcServer::Start(taken, {&other});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
}

TEST(Rpc, BadPortIsInvalidArgument) {
  ServerOptions bad;
  bad.port = 70000;
  EchoService service;
  auto server = RpcServer::Start(bad, {&service});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Rpc, BackoffGrowsAndIsCapped) {
  RetryOptions r;
  r.initial_backoff = absl::Milliseconds(10);
  r.max_backoff = absl::Milliseconds(50);
  r.multiplier = 2.0;
  EXPECT_EQ(BackoffFor(r, 1), absl::Milliseconds(10));
  EXPECT_EQ(BackoffFor(r, 2), absl::Milliseconds(20));
  EXPECT_EQ(BackoffFor(r, 3), absl::Milliseconds(40));
  EXPECT_EQ(BackoffFor(r, 4), absl::Milliseconds(50));
  EXPECT_EQ(BackoffFor(r, 10), absl::Milliseconds(50));
}

TEST(GrpcStatus, CodesAndMessagesRoundTrip) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status in(static_cast<absl::StatusCode>(code), code == 0 ? "" : "msg");
    absl::Status out = FromGrpcStatus(ToGrpcStatus(in));
    EXPECT_EQ(out.code(), in.code());
    EXPECT_EQ(out.message(), in.message());
  }
  absl::Status ctx = FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no x"), "Svc.Get");
  EXPECT_EQ(ctx.message(), "Svc.Get: no x");
}

}  // namespace
TEST(Rpc, CallsWithoutTheJobTokenAreUnauthenticated) {
  EchoService service;
  service.token = "job-secret";
  auto server = RpcServer::Start(ServerOptions(), {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  EchoRequest req;
  req.set_text("hi");
  for (const std::string& token : {std::string(), std::string("other-job")}) {
    auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address(), .auth_token = token}));
    grpc::ClientContext ctx;
    EchoReply reply;
    grpc::Status s = stub->Say(&ctx, req, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_NE(s.error_message().find("token"), std::string::npos) << s.error_message();
    EXPECT_EQ(service.calls_.load(), 0) << "a handler ran for an unauthenticated call";
  }
  auto stub = Echo::NewStub(MakeChannel({.target = (*server)->address(), .auth_token = "job-secret"}));
  grpc::ClientContext ctx;
  EchoReply reply;
  grpc::Status s = stub->Say(&ctx, req, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.text(), "hi");
}

TEST(Rpc, TokenLoadsFromAFileAndRejectsAnEmptyOne) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  {
    std::ofstream f(dir + "/token");
    f << "  abc123\n";
  }
  auto t = LoadAuthToken(dir + "/token");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "abc123");
  { std::ofstream f(dir + "/empty"); }
  EXPECT_EQ(LoadAuthToken(dir + "/empty").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadAuthToken(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(NewAuthToken(), NewAuthToken());
  EXPECT_EQ(NewAuthToken().size(), 32u);
}

}  // namespace tandem
