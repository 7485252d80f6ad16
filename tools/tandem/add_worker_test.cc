#include "tools/tandem/add_worker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpDir(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  const std::string d = absl::StrCat(t != nullptr ? t : "/tmp", "/", name);
  mkdir(d.c_str(), 0755);
  return d;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(AddWorkerTest, SlotsRoundTripAndAreClaimedOnceInOrder) {
  const std::string dir = TmpDir("slots");
  ASSERT_TRUE(WriteWorkerSlot(dir, 3, {"A=1"}, {"/bin/w", "--worker_id=worker-3", "--x=a b"}).ok());
  ASSERT_TRUE(WriteWorkerSlot(dir, 2, {}, {"/bin/w", "--worker_id=worker-2"}).ok());
  auto first = ClaimWorkerSlot(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->index, 2);
  auto second = ClaimWorkerSlot(dir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->index, 3);
  EXPECT_EQ(second->env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(second->argv, (std::vector<std::string>{"/bin/w", "--worker_id=worker-3", "--x=a b"}));
  auto none = ClaimWorkerSlot(dir);
  EXPECT_TRUE(absl::IsResourceExhausted(none.status())) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(), "max_workers")) << none.status();
}

TEST(AddWorkerTest, ARunWithoutRoomOrDirectorySaysWhatToDo) {
  const std::string dir = TmpDir("no-slots");
  auto s = ClaimWorkerSlot(dir);
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--max_workers above --workers"))
      << s.status();
  auto missing = ClaimWorkerSlot(dir + "/nope");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  absl::Status empty = RunAddWorker({}, stdout, [] { return false; });
  EXPECT_TRUE(absl::IsInvalidArgument(empty)) << empty;
}

TEST(AddWorkerTest, RunsTheSlotsCommandAndReportsItsExit) {
  const std::string dir = TmpDir("run");
  // A stand-in worker: prints its environment variable and exits 3.
  ASSERT_TRUE(WriteWorkerSlot(dir, 1, {"TANDEM_SLOT_TEST=hello"},
                              {"/bin/sh", "-c", "echo got $TANDEM_SLOT_TEST >&2; exit 3"})
                  .ok());
  std::FILE* out = std::tmpfile();
  absl::Status s = RunAddWorker({dir}, out, [] { return false; });
  std::fclose(out);
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "worker-1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "status 3")) << s;
  EXPECT_TRUE(absl::StrContains(Read(dir + "/worker-1.log"), "got hello"));
  EXPECT_GT(std::stoi(Read(dir + "/worker-1.pid")), 0);
  EXPECT_TRUE(RunningAddedWorkers(dir, 0, 4).empty());
  // tandem local's summary counts it: started, exited, not cleanly.
  AddedWorkers n = CountAddedWorkers(dir, 0, 4);
  EXPECT_EQ(n.started, 1);
  EXPECT_EQ(n.exited, 1);
  EXPECT_EQ(n.clean, 0);
  ASSERT_TRUE(WriteWorkerSlot(dir, 2, {}, {"/bin/sh", "-c", "exit 0"}).ok());
  out = std::tmpfile();
  EXPECT_TRUE(RunAddWorker({dir}, out, [] { return false; }).ok());
  std::fclose(out);
  n = CountAddedWorkers(dir, 0, 4);
  EXPECT_EQ(n.started, 2);
  EXPECT_EQ(n.clean, 1);
}

}  // namespace
}  // namespace cli
}  // namespace tandem
