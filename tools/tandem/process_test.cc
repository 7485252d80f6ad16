#include "tools/tandem/process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

SubprocessOptions Shell(const std::string& name, const std::string& script) {
  SubprocessOptions o;
  o.name = name;
  o.argv = {"/bin/sh", "-c", script};
  o.log_path = TmpPath(name + ".log");
  return o;
}

// Reads the child's piped stdout until `text` appears (blocking poll, no sleeps).
bool ReadUntil(Subprocess& p, const std::string& text) {
  std::string got;
  while (!absl::StrContains(got, text)) {
    char buf[256];
    const ssize_t n = read(p.stdout_fd(), buf, sizeof(buf));
    if (n > 0) {
      got.append(buf, n);
    } else if (n == 0) {
      return false;
    } else if (errno == EAGAIN) {
      p.WaitFor(absl::Milliseconds(5));
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

TEST(SubprocessTest, ExitStatusAndLogCaptured) {
  auto p = Subprocess::Start(Shell("exit3", "echo to-stdout; echo to-stderr >&2; exit 3"));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->WaitFor(absl::InfiniteDuration()));
  EXPECT_FALSE((*p)->succeeded());
  EXPECT_EQ((*p)->exit_code(), 3);
  EXPECT_EQ((*p)->DescribeExit(), "exited with status 3");
  const std::string log = ReadFile((*p)->log_path());
  EXPECT_TRUE(absl::StrContains(log, "to-stdout")) << log;
  EXPECT_TRUE(absl::StrContains(log, "to-stderr")) << log;
}

TEST(SubprocessTest, SuccessAndEnvironmentOverride) {
  SubprocessOptions o = Shell("env", "test \"$TANDEM_PROCESS_TEST\" = yes");
  o.env = {"TANDEM_PROCESS_TEST=yes"};
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->WaitFor(absl::InfiniteDuration()));
  EXPECT_TRUE((*p)->succeeded()) << (*p)->DescribeExit();
}

TEST(SubprocessTest, PipedStdoutIsReadable) {
  SubprocessOptions o = Shell("piped", "echo hello-pipe; echo not-in-pipe >&2");
  o.pipe_stdout = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(ReadUntil(**p, "hello-pipe"));
  ASSERT_TRUE((*p)->WaitFor(absl::InfiniteDuration()));
  EXPECT_FALSE(absl::StrContains(ReadFile((*p)->log_path()), "hello-pipe"));
}

TEST(SubprocessTest, StopEscalatesToKillWhenTermIsIgnored) {
  SubprocessOptions o =
      Shell("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done");
  o.pipe_stdout = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(ReadUntil(**p, "ready"));
  (*p)->Stop(absl::Milliseconds(200));
  EXPECT_TRUE((*p)->exited());
  EXPECT_EQ((*p)->term_signal(), SIGKILL);
  EXPECT_TRUE(absl::StartsWith((*p)->DescribeExit(), "killed by signal 9")) << (*p)->DescribeExit();
  EXPECT_NE(kill((*p)->pid(), 0), 0);  // reaped: the pid is gone
}

TEST(SubprocessTest, StopAllTerminatesPolitelyWithinGrace) {
  SubprocessOptions a = Shell("polite-a", "echo ready; exec sleep 1000");
  SubprocessOptions b = Shell("polite-b", "echo ready; exec sleep 1000");
  a.pipe_stdout = b.pipe_stdout = true;
  auto pa = Subprocess::Start(a);
  auto pb = Subprocess::Start(b);
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_TRUE(ReadUntil(**pa, "ready"));
  ASSERT_TRUE(ReadUntil(**pb, "ready"));
  StopAll({pa->get(), nullptr, pb->get()}, absl::Seconds(30));
  EXPECT_EQ((*pa)->term_signal(), SIGTERM);
  EXPECT_EQ((*pb)->term_signal(), SIGTERM);
}

TEST(SubprocessTest, MissingBinaryIsAnErrorNotACrash) {
  SubprocessOptions o;
  o.name = "ghost";
  o.argv = {TmpPath("no-such-binary")};
  o.log_path = TmpPath("ghost.log");
  auto p = Subprocess::Start(o);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "ghost")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "no-such-binary")) << p.status();
}

TEST(SubprocessTest, UnwritableLogIsAnError) {
  SubprocessOptions o = Shell("nolog", "true");
  o.log_path = TmpPath("missing-dir/x.log");
  auto p = Subprocess::Start(o);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "missing-dir")) << p.status();
}

TEST(TailOfFileTest, LastLinesOnly) {
  const std::string path = TmpPath("tail.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(TailOfFile(path, 2), "line 98\nline 99\n");
  EXPECT_EQ(TailOfFile(path, 1000).substr(0, 7), "line 0\n");
  EXPECT_TRUE(absl::StrContains(TailOfFile(TmpPath("absent"), 3), "cannot read"));
}

}  // namespace
}  // namespace cli
}  // namespace tandem
