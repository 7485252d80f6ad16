// Mutual TLS on a whole run: `tandem local --tls` makes a CA for the run
// (<run_dir>/tls), every process serves and dials with the one node
// certificate, and the job trains to the end. While it runs, `tandem
// status` with the run's CA, certificate and token sees it; the same call
// in plain text, or with TLS but without a client certificate, is refused.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(TlsTest, MutualTlsRunTrainsAndOnlyCertificateHoldersGetIn) {
  const std::string run_dir = TmpPath("tls");
  bool tried = false;
  TandemRun with_cert, plain, no_cert;
  TandemRun r = RunTandem(
      {"local", "--tls", "--workers=2", "--model=mlp:784,128,10", "--epochs=2",
       "--log-every=100", "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (tried || !absl::StartsWith(line, "step 100/")) return;
        tried = true;
        std::string coordinator = ReadFile(run_dir + "/coordinator.port");
        while (!coordinator.empty() && coordinator.back() == '\n') coordinator.pop_back();
        coordinator = "127.0.0.1:" + coordinator;
        const std::string tls = run_dir + "/tls/";
        const std::vector<std::string> base = {"status", "--coordinator=" + coordinator,
                                               "--job_id=local", "--timeout_seconds=5",
                                               "--token_file=" + run_dir + "/token"};
        std::vector<std::string> args = base;
        for (const std::string& a :
             {"--tls_ca=" + tls + "ca.pem", "--tls_cert=" + tls + "node.pem",
              "--tls_key=" + tls + "node.key", std::string("--tls_server_name=tandem.job")}) {
          args.push_back(a);
        }
        with_cert = RunTandem(args);
        plain = RunTandem(base);
        args = base;
        args.push_back("--tls_ca=" + tls + "ca.pem");
        args.push_back("--tls_server_name=tandem.job");
        no_cert = RunTandem(args);
      });
  ASSERT_TRUE(tried) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(with_cert.exit_code, 0) << with_cert.stdout_text << with_cert.stderr_text;
  EXPECT_TRUE(absl::StrContains(with_cert.stdout_text, "state RUNNING")) << with_cert.stdout_text;
  EXPECT_EQ(plain.exit_code, 1) << plain.stdout_text << plain.stderr_text;
  EXPECT_EQ(no_cert.exit_code, 1) << no_cert.stdout_text << no_cert.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(ReadFile(run_dir + "/worker-0.cmd"), "--tls_mutual"));
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "test accuracy")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
