#include "tools/tandem/trace_command.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/io/file.h"
#include "common/trace/chrome_json.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(base != nullptr ? base : "/tmp") + "/" + name;
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

std::string OneProcess(int64_t pid, const std::string& name) {
  trace::TraceFileInfo info;
  info.pid = pid;
  info.process_name = name;
  return trace::ChromeTraceJson({{"step", "step", 1000, 10, 1, -1, 1, 0, 'X'}}, info);
}

TEST(TraceCommandTest, MergeTraceDirMergesEveryFileButItsOwnOutput) {
  const std::string dir = TmpDir("merge_dir");
  ASSERT_TRUE(WriteFileAtomically(dir + "/trace-worker-a-1.json", OneProcess(0, "w0")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/trace-worker-b-1.json", OneProcess(1, "w1")).ok());
  absl::StatusOr<TraceCollection> c = MergeTraceDir(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->files, 2);
  // Again: the merged trace.json is not merged into itself.
  c = MergeTraceDir(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->files, 2);
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/trace.json");
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"name\":\"w1\""), std::string::npos);
}

TEST(TraceCommandTest, MergeTraceDirErrorsSayWhatToDo) {
  const std::string empty = TmpDir("empty_dir");
  EXPECT_NE(MergeTraceDir(empty).status().message().find("--trace_file="), std::string::npos);
  const std::string bad = TmpDir("bad_dir");
  ASSERT_TRUE(WriteFileAtomically(bad + "/x.json", "{\"traceEvents\":[").ok());
  EXPECT_EQ(MergeTraceDir(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TraceCommandTest, ARunWithoutTraceIsFailedPrecondition) {
  const std::string run = TmpDir("untraced_run");
  absl::StatusOr<TraceCollection> c = CollectRunTrace(run, absl::Seconds(1));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("tandem local --trace"), std::string::npos);
}

TEST(TraceCommandTest, NeverSignalsAProcessThatIsNotTheTracedChild) {
  // A marker whose pid file names this test process (a reused pid): its
  // command line lacks the child's --trace_file, so it is not signalled —
  // SIGUSR1 would end this process — and the file already there is merged.
  const std::string run = TmpDir("reused_pid_run");
  const std::vector<std::string> args = TraceChildArgs(run, "worker-0", 50);
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[2], "--trace_file=" + run + "/trace/worker-0.json");
  std::ofstream(run + "/worker-0.pid") << getpid() << "\n";
  ASSERT_TRUE(WriteFileAtomically(run + "/trace/worker-0.json", OneProcess(0, "w0")).ok());
  absl::StatusOr<TraceCollection> c = CollectRunTrace(run, absl::Seconds(1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->signalled, 0);
  EXPECT_EQ(c->files, 1);
  EXPECT_EQ(c->path, run + "/trace.json");
}

TEST(TraceCommandTest, ATracedChildThatNeverWroteIsNamed) {
  const std::string run = TmpDir("missing_run");
  TraceChildArgs(run, "dataserver", 50);
  std::ofstream(run + "/dataserver.pid") << 999999999 << "\n";  // started, now gone
  TraceChildArgs(run, "worker-0", 50);
  TraceChildArgs(run, "worker-1", 50);  // a slot never started: no pid file, not named
  ASSERT_TRUE(WriteFileAtomically(run + "/trace/worker-0.json", OneProcess(0, "w0")).ok());
  absl::StatusOr<TraceCollection> c = CollectRunTrace(run, absl::Seconds(1));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->missing.size(), 1u);
  EXPECT_NE(c->missing[0].find("dataserver wrote no trace"), std::string::npos) << c->missing[0];
  EXPECT_NE(FormatTraceCollection(*c).find("1 process(es)"), std::string::npos);
}

}  // namespace
}  // namespace cli
}  // namespace tandem
