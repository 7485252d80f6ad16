// Who may join: `tandem local` writes a fresh token to <run_dir>/token and
// every process of the run sends it with every RPC. While a job runs:
//  - a worker started with the job's command line but without the token
//    (and another worker id) is refused by the services: it exits 1 with an
//    UNAUTHENTICATED message saying how to pass the token, and the job
//    never sees it (no new generation);
//  - `tandem status` without the token is refused the same way, and with
//    --token_file it shows the running job.
// The job is far longer than the checks (--epochs=100) and is stopped with
// Ctrl-C once they are done, so it cannot finish before `tandem status`
// asks about it however slow the machine is.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace e2e {
namespace {

TEST(JobTokenTest, ProcessesWithoutTheRunsTokenAreUnauthenticated) {
  const std::string run_dir = TmpPath("token");
  bool tried = false;
  int intruder_exit = -1;
  std::string intruder_log;
  TandemRun status_without, status_with;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--model=mlp:784,128,10", "--epochs=100", "--log-every=100",
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (tried || !absl::StartsWith(line, "step 100/")) return;
        tried = true;
        std::string cmd = ReadFile(run_dir + "/worker-1.cmd");
        while (!cmd.empty() && cmd.back() == '\n') cmd.pop_back();
        cli::SubprocessOptions o;
        o.name = "intruder";
        o.argv = {"/usr/bin/env"};
        std::string coordinator;
        for (absl::string_view part : absl::StrSplit(cmd, ' ', absl::SkipEmpty())) {
          if (absl::StartsWith(part, "--token_file=")) continue;
          if (absl::StartsWith(part, "--worker_id=")) part = "--worker_id=intruder";
          if (absl::ConsumePrefix(&part, "--coordinator=")) {
            coordinator = std::string(part);
            o.argv.push_back("--coordinator=" + coordinator);
            continue;
          }
          o.argv.emplace_back(part);
        }
        o.env = {"TANDEM_TOKEN="};
        o.log_path = TmpPath("intruder.log");
        auto p = cli::Subprocess::Start(o);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_TRUE((*p)->WaitFor(absl::Seconds(60)));
        intruder_exit = (*p)->exit_code();
        intruder_log = ReadFile(o.log_path);
        status_without = RunTandem({"status", "--coordinator=" + coordinator, "--job_id=local"});
        status_with = RunTandem({"status", "--coordinator=" + coordinator, "--job_id=local",
                                 "--token_file=" + run_dir + "/token"});
        const int pid = ReadLockHolder(run_dir);  // tandem local itself
        ASSERT_GT(pid, 0);
        ASSERT_EQ(kill(pid, SIGINT), 0);
      });
  ASSERT_TRUE(tried) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(intruder_exit, 1) << intruder_log;
  EXPECT_TRUE(absl::StrContains(intruder_log, "need its token")) << intruder_log;
  EXPECT_TRUE(absl::StrContains(intruder_log, "--token_file")) << intruder_log;
  EXPECT_EQ(status_without.exit_code, 1) << status_without.stdout_text << status_without.stderr_text;
  EXPECT_TRUE(absl::StrContains(status_without.stderr_text, "need its token"))
      << status_without.stderr_text;
  EXPECT_EQ(status_with.exit_code, 0) << status_with.stderr_text;
  EXPECT_TRUE(absl::StrContains(status_with.stdout_text, "state RUNNING")) << status_with.stdout_text;
  ASSERT_EQ(r.exit_code, 130) << r.stdout_text << r.stderr_text;  // the Ctrl-C above
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
