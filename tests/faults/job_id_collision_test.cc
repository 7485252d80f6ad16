// Rendezvous collision: while a 2-worker job runs, a worker of "another
// job" — the same command line as the job's worker-0 (same job id, same
// worker id, same coordinator) in a new process — tries to join. The
// coordinator refuses it (ALREADY_EXISTS, naming the job id and what to
// change); the intruder exits 1 with that message and the running job goes
// on without a new generation.
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

TEST(JobIdCollisionTest, ASecondJobWithTheSameJobIdIsRefusedWithAMessage) {
  const std::string run_dir = TmpPath("collision");
  bool tried = false;
  int intruder_exit = -1;
  std::string intruder_log;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--model=mlp:784,128,10", "--epochs=4",
       "--log-every=100", "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (tried || !absl::StartsWith(line, "step 100/")) return;
        tried = true;
        // worker-0.cmd: "ENV=v ... /path/worker --flag=v ..." as tandem ran it.
        std::string cmd = ReadFile(run_dir + "/worker-0.cmd");
        while (!cmd.empty() && cmd.back() == '\n') cmd.pop_back();
        cli::SubprocessOptions o;
        o.name = "intruder";
        o.argv = {"/usr/bin/env"};
        for (absl::string_view part : absl::StrSplit(cmd, ' ', absl::SkipEmpty())) {
          o.argv.emplace_back(part);
        }
        o.log_path = TmpPath("intruder.log");
        auto p = cli::Subprocess::Start(o);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_TRUE((*p)->WaitFor(absl::Seconds(60)));
        intruder_exit = (*p)->exit_code();
        intruder_log = ReadFile(o.log_path);
      });
  ASSERT_TRUE(tried) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(intruder_exit, 1) << intruder_log;
  EXPECT_TRUE(absl::StrContains(intruder_log, "join refused: worker id 'worker-0' is already rank 0 of job 'local'"))
      << intruder_log << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(intruder_log, "another --job_id")) << intruder_log;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(ReadFile(run_dir + "/coordinator.log"), "generation 2 formed"));
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
