// TLS on the gRPC plane: bad settings are refused naming the flag or file;
// with mutual TLS only a client holding a certificate of the job's CA gets
// through, and a plain-text client, one without a certificate, one from
// another CA and one expecting another server name are all turned away.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/rpc/channel.h"
#include "common/rpc/echo_test.grpc.pb.h"
#include "common/rpc/server.h"
#include "common/rpc/tls.h"
#include "common/rpc/tls_certs.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using tandem::testing::Echo;
using tandem::testing::EchoReply;
using tandem::testing::EchoRequest;

class EchoService final : public Echo::Service {
 public:
  grpc::Status Say(grpc::ServerContext*, const EchoRequest* req, EchoReply* reply) override {
    reply->set_text(req->text());
    return grpc::Status::OK;
  }
};

std::string Tmp(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

TlsOptions OptionsFor(const JobCertificates& c, bool mutual) {
  TlsOptions o;
  o.cert_file = c.cert_file;
  o.key_file = c.key_file;
  o.ca_file = c.ca_file;
  o.mutual = mutual;
  o.server_name = c.server_name;
  return o;
}

TlsConfig Load(const TlsOptions& o) {
  absl::StatusOr<TlsConfig> c = LoadTls(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : TlsConfig{};
}

// One call with a short deadline, failing fast instead of waiting for a
// connection that will never come up.
grpc::Status Say(const std::string& address, const TlsConfig& tls) {
  ChannelOptions co;
  co.target = address;
  co.tls = tls;
  auto stub = Echo::NewStub(MakeChannel(co));
  EchoRequest req;
  req.set_text("over tls");
  EchoReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = stub->Say(&ctx, req, &reply);
  if (s.ok()) EXPECT_EQ(reply.text(), "over tls");
  return s;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto job = MakeJobCertificates(Tmp("job"), {});
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = new JobCertificates(*job);
    JobCertificateOptions other_options;
    other_options.server_name = job->server_name;  // same name, another CA
    auto other = MakeJobCertificates(Tmp("other"), other_options);
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = new JobCertificates(*other);
  }
  static JobCertificates* job_;
  static JobCertificates* other_;
};
JobCertificates* TlsTest::job_ = nullptr;
JobCertificates* TlsTest::other_ = nullptr;

TEST_F(TlsTest, BadSettingsNameTheFlagOrFile) {
  TlsOptions o = OptionsFor(*job_, false);
  o.key_file = "";
  EXPECT_TRUE(absl::StrContains(LoadTls(o).status().message(), "--tls_key")) << LoadTls(o).status();
  o = OptionsFor(*job_, false);
  o.ca_file = "";
  EXPECT_TRUE(absl::StrContains(LoadTls(o).status().message(), "--tls_ca")) << LoadTls(o).status();
  o = TlsOptions{};
  o.ca_file = job_->ca_file;
  o.mutual = true;
  EXPECT_TRUE(absl::StrContains(LoadTls(o).status().message(), "--tls_mutual needs"));
  o = OptionsFor(*job_, false);
  o.cert_file = Tmp("missing.pem");
  EXPECT_EQ(LoadTls(o).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(LoadTls(o).status().message(), Tmp("missing.pem")));
  o = OptionsFor(*job_, false);
  o.key_file = job_->cert_file;  // a certificate where the key should be
  EXPECT_EQ(LoadTls(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(LoadTls(o).status().message(), "PRIVATE KEY"));
  EXPECT_FALSE(Load(TlsOptions{}).enabled);
}

TEST_F(TlsTest, ServerWithoutACertificateIsRefused) {
  TlsOptions o;
  o.ca_file = job_->ca_file;
  ServerOptions so;
  so.tls = Load(o);  // a client-only config
  EchoService service;
  auto server = RpcServer::Start(so, {&service});
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StrContains(server.status().message(), "--tls_cert")) << server.status();
}

TEST_F(TlsTest, OneWayTlsServesAClientThatTrustsTheCa) {
  ServerOptions so;
  so.tls = Load(OptionsFor(*job_, false));
  EchoService service;
  auto server = RpcServer::Start(so, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  TlsOptions client;
  client.ca_file = job_->ca_file;
  client.server_name = job_->server_name;
  EXPECT_TRUE(Say((*server)->address(), Load(client)).ok());
  EXPECT_FALSE(Say((*server)->address(), TlsConfig{}).ok()) << "plain text got through";
  client.ca_file = other_->ca_file;
  EXPECT_FALSE(Say((*server)->address(), Load(client)).ok()) << "another CA's trust got through";
}

TEST_F(TlsTest, MutualTlsAdmitsOnlyTheJobsCertificates) {
  ServerOptions so;
  so.tls = Load(OptionsFor(*job_, true));
  EchoService service;
  auto server = RpcServer::Start(so, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  EXPECT_TRUE(Say(address, Load(OptionsFor(*job_, true))).ok());
  EXPECT_FALSE(Say(address, TlsConfig{}).ok()) << "plain text got through";
  TlsOptions no_cert;
  no_cert.ca_file = job_->ca_file;
  no_cert.server_name = job_->server_name;
  EXPECT_FALSE(Say(address, Load(no_cert)).ok()) << "a client without a certificate got through";
  TlsOptions foreign = OptionsFor(*other_, true);
  foreign.ca_file = job_->ca_file;  // trusts the server, but its own cert is another CA's
  EXPECT_FALSE(Say(address, Load(foreign)).ok()) << "another CA's certificate got through";
  TlsOptions wrong_name = OptionsFor(*job_, true);
  wrong_name.server_name = "someone.else";
  EXPECT_FALSE(Say(address, Load(wrong_name)).ok()) << "the server name was not checked";
}

TEST(TlsCertsTest, MissingOpensslSaysWhatToInstall) {
  JobCertificateOptions o;
  o.openssl = "/nonexistent/openssl";
  auto c = MakeJobCertificates(Tmp("none"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "install openssl")) << c.status();
}

}  // namespace
}  // namespace tandem
