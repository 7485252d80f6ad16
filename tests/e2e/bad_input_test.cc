// `tandem local` with bad input: one line saying what to fix, a non-zero
// exit, and nothing started (no run directory contents).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace e2e {
namespace {

struct Case {
  std::vector<std::string> args;
  std::string expected;  // part of the one-line message
};

void ExpectRejected(const Case& c) {
  static int n = 0;
  const std::string run_dir = TmpPath(absl::StrCat("bad-", n++));
  std::vector<std::string> args = {"local", "--run-dir=" + run_dir};
  args.insert(args.end(), c.args.begin(), c.args.end());
  TandemRun r = RunTandem(args);
  EXPECT_EQ(r.exit_code, 2) << c.expected << "\n" << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, c.expected)) << r.stderr_text;
  EXPECT_TRUE(absl::StartsWith(r.stderr_text, "tandem local: ")) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_NE(access(run_dir.c_str(), F_OK), 0) << "run directory created for bad input";
}

TEST(BadInputTest, ZeroWorkers) { ExpectRejected({{"--workers", "0"}, "--workers must be"}); }

TEST(BadInputTest, MinAboveMax) {
  ExpectRejected({{"--min-workers=3", "--max-workers=2"}, "greater than --max_workers"});
}

TEST(BadInputTest, UnknownModel) {
  ExpectRejected({{"--model", "transformer:big"}, "bad --model"});
  ExpectRejected({{"--model=mlp:784,64,3"}, "gives 3 classes"});
}

TEST(BadInputTest, UnknownDataset) {
  ExpectRejected({{"--dataset=imagenet"}, "unknown --dataset 'imagenet'"});
}

TEST(BadInputTest, UnknownOptimizer) {
  ExpectRejected({{"--optimizer=rmsprop"}, "unknown --optimizer"});
}

TEST(BadInputTest, OccupiedPort) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ExpectRejected({{absl::StrCat("--port=", port)}, absl::StrCat("port ", port, " on 127.0.0.1 is not free")});
  close(fd);
}

// Accepted before and then ignored (the whole job ran): refused now.
TEST(BadInputTest, NegativeValuesAreRefusedNotDropped) {
  ExpectRejected({{"--max-steps", "-5"}, "--max_steps must not be negative (got -5)"});
  ExpectRejected({{"--checkpoint-every=-3"}, "--checkpoint_every must not be negative"});
  ExpectRejected({{"--momentum=-0.5"}, "--momentum must not be negative"});
}

// Trained on the CPU with rc 0 before (one line in worker-0.log).
TEST(BadInputTest, CudaWithoutAGpuIsRefused) {
  if (access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "this machine has a GPU";
  ExpectRejected({{"--backend=cuda", "--workers=1"}, "--backend cuda: this machine has no GPU"});
  // The worker itself refuses too (it trained on the CPU with rc 0 before).
  cli::SubprocessOptions o;
  o.name = "worker";
  o.argv = {std::string(std::getenv("TEST_SRCDIR")) + "/tandem/services/worker/worker",
            "--backend=cuda", "--coordinator=127.0.0.1:1", "--data_servers=127.0.0.1:2",
            "--join_timeout_seconds=1"};
  o.log_path = TmpPath("cuda-worker.log");
  auto p = cli::Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->WaitFor(absl::Seconds(60)));
  EXPECT_FALSE((*p)->succeeded()) << (*p)->DescribeExit();
  const std::string log = ReadFile(o.log_path);
  EXPECT_TRUE(absl::StrContains(log, "backend \"cuda\" unavailable")) << log;
  EXPECT_TRUE(absl::StrContains(log, "use --backend cpu")) << log;
}

TEST(BadInputTest, UnknownCommandAndStatusWithoutCoordinator) {
  TandemRun r = RunTandem({"train"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "unknown command 'train'")) << r.stderr_text;
  r = RunTandem({"status"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "--coordinator")) << r.stderr_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
