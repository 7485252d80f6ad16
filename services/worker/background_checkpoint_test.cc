// The background checkpoint writer on its own: a snapshot written while
// its source keeps changing is byte-identical to the source written
// synchronously at the moment of the capture; the write is in flight while
// the caller goes on; it runs at idle priority until the caller waits for
// it; a write failing mid-file is not committed, is counted,
// and the next one succeeds; a shard's after_write (the manifest) runs
// between its file and its commit.
#include "services/worker/background_checkpoint.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A shard's live state: parameters, one optimizer buffer, a blob.
struct Live {
  std::vector<float> params = std::vector<float>(300000);
  std::vector<float> momentum = std::vector<float>(300000);
  std::string cursor = "cursor-bytes";
  int64_t step = 0;

  void Advance() {
    ++step;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] = 0.5f * params[i] + static_cast<float>(i % 97) * 1e-3f * step;
      momentum[i] = 0.9f * momentum[i] + 1e-4f * step;
    }
    cursor = "cursor-" + std::to_string(step);
  }
  checkpoint::CheckpointView View() const {
    checkpoint::CheckpointView v;
    v.model_fingerprint = 42;
    v.step = step;
    v.total_params = static_cast<int64_t>(params.size());
    v.range_hi = v.total_params;
    v.params = params;
    v.optimizer_name = "sgd";
    v.optimizer_state.emplace_back("momentum", absl::MakeConstSpan(momentum));
    v.blobs.emplace_back("data_cursor", cursor);
    return v;
  }
};

struct Commits {
  std::vector<int64_t> steps;
  std::vector<int64_t> generations;
  std::vector<int> shards;  // shard index * 100 + shards, per commit
};

BackgroundCheckpointWriter::CommitFn Recorder(Commits* c) {
  return [c](const v1::CheckpointRecord& r, const CommitTarget& target) {
    c->steps.push_back(r.step());
    c->generations.push_back(target.generation);
    c->shards.push_back(target.shard * 100 + target.shards);
    return absl::OkStatus();
  };
}

v1::CheckpointRecord RecordAt(int64_t step, const std::string& path) {
  v1::CheckpointRecord r;
  r.set_step(step);
  r.set_path(path);
  return r;
}

TEST(BackgroundCheckpointTest, WrittenWhileTheStateChangesIsByteIdenticalToASyncWrite) {
  Live live;
  for (int i = 0; i < 4; ++i) live.Advance();
  const std::string sync_path = Tmp("sync-4.tckpt"), bg_path = Tmp("bg-4.tckpt");
  ASSERT_TRUE(checkpoint::WriteCheckpoint(sync_path, live.View()).ok());

  absl::Notification entered, release;
  BackgroundCheckpointOptions o;
  o.write.before_write = [&](uint64_t, uint64_t) {
    if (!entered.HasBeenNotified()) entered.Notify();
    release.WaitForNotification();
    return absl::OkStatus();
  };
  Commits commits;
  BackgroundCheckpointWriter w(o, Recorder(&commits));
  w.Acquire()->Capture(live.View());
  w.Submit(bg_path, RecordAt(4, bg_path), {/*generation=*/3});
  // The writer holds the file open mid-write while "training" goes on.
  entered.WaitForNotification();
  EXPECT_EQ(w.in_flight_step(), 4);
  live.Advance();
  live.Advance();
  release.Notify();
  const BackgroundCheckpointWriter::Outcome out = w.Drain();
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.step, 4);
  EXPECT_EQ(w.in_flight_step(), -1);
  EXPECT_EQ(commits.steps, std::vector<int64_t>{4});
  EXPECT_EQ(commits.generations, std::vector<int64_t>{3});
  const std::string a = ReadFile(sync_path), b = ReadFile(bg_path);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the background file differs from the synchronous one";
}

TEST(BackgroundCheckpointTest, AWriteFailingMidFileIsNotCommittedAndTheNextOneIs) {
  auto metrics = Metrics::Create(MetricsOptions());
  ASSERT_TRUE(metrics.ok());
  auto cm = CheckpointMetrics::Create(metrics->get());
  ASSERT_TRUE(cm.ok()) << cm.status();
  Live live;
  live.Advance();
  bool fail = true;
  int writes = 0;
  BackgroundCheckpointOptions o;
  o.metrics = cm->get();
  o.write.before_write = [&](uint64_t offset, uint64_t) -> absl::Status {
    ++writes;
    if (fail && offset > 0) return absl::ResourceExhaustedError("test hook: disk full mid-file");
    return absl::OkStatus();
  };
  Commits commits;
  BackgroundCheckpointWriter w(o, Recorder(&commits));
  const std::string path = Tmp("fail.tckpt");
  w.Acquire()->Capture(live.View());
  w.Submit(path, RecordAt(1, path), {1});
  BackgroundCheckpointWriter::Outcome out = w.Drain();
  EXPECT_EQ(out.status.code(), absl::StatusCode::kResourceExhausted) << out.status;
  EXPECT_GT(writes, 1);
  EXPECT_TRUE(commits.steps.empty());
  EXPECT_TRUE(ReadFile(path).empty()) << "a torn file was left at the path";
  std::string scrape = (*metrics)->Scrape();
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_checkpoint_failures_total 1")) << scrape;

  fail = false;
  live.Advance();
  CheckpointSnapshot* snap = w.Acquire();
  snap->Capture(live.View());
  const int64_t bytes = snap->bytes();
  w.Submit(path, RecordAt(2, path), {1});
  out = w.Drain();
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(commits.steps, std::vector<int64_t>{2});
  auto c = checkpoint::ReadCheckpoint(path, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 2);
  // The snapshot is the file's image, rounded up to 4 KiB blocks.
  const int64_t file_size = static_cast<int64_t>(ReadFile(path).size());
  EXPECT_EQ(bytes, (file_size + 4095) / 4096 * 4096);
  EXPECT_GT(file_size, 2 * 300000 * 4);
  scrape = (*metrics)->Scrape();
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_checkpoint_snapshot_bytes " +
                                            std::to_string(bytes)))
      << scrape;
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_checkpoint_write_seconds_count 1")) << scrape;
}

// Whether this process may leave SCHED_IDLE again (tried on a throwaway
// thread, as the writer does).
bool CanLeaveIdle() {
  bool ok = false;
  std::thread([&ok] {
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
    sched_param p{};
    ok = sched_setscheduler(0, SCHED_IDLE, &p) == 0 && sched_setscheduler(0, SCHED_OTHER, &p) == 0;
  }).join();
  return ok;
}

// The writer runs at SCHED_IDLE (CPU training leaves idle) until the
// trainer has to wait for it: then it is raised to SCHED_OTHER for the rest
// of that write, and the next write is idle again.
TEST(BackgroundCheckpointTest, WritesAtIdlePriorityUntilTheTrainerWaitsForIt) {
  Live live;
  live.Advance();
  absl::Mutex mu;
  std::vector<int> at_start, mid_file;  // the writer's policy per write
  std::atomic<pid_t> writer{0};
  absl::Notification entered, release, second;
  BackgroundCheckpointOptions o;
  o.write.before_write = [&](uint64_t offset, uint64_t) {
    const int policy = sched_getscheduler(0);
    absl::MutexLock lock(&mu);
    if (offset == 0) {
      at_start.push_back(policy);
    } else if (mid_file.size() < at_start.size()) {
      mid_file.push_back(policy);
    }
    if (mid_file.size() == 2 && !second.HasBeenNotified()) second.Notify();
    if (at_start.size() == 1 && !entered.HasBeenNotified()) {
      writer = static_cast<pid_t>(syscall(SYS_gettid));
      entered.Notify();
      mu.Unlock();
      release.WaitForNotification();  // held mid-file until the trainer waits
      mu.Lock();
    }
    return absl::OkStatus();
  };
  Commits commits;
  BackgroundCheckpointWriter w(o, Recorder(&commits));
  w.Acquire()->Capture(live.View());
  w.Submit(Tmp("prio-1.tckpt"), RecordAt(1, Tmp("prio-1.tckpt")), {1});
  entered.WaitForNotification();
  // The next checkpoint step comes while the write is in flight.
  std::thread trainer([&] { w.Acquire(); });
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (CanLeaveIdle() && sched_getscheduler(writer) == SCHED_IDLE && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  release.Notify();
  trainer.join();
  live.Advance();
  CheckpointSnapshot* snap = w.Acquire();
  snap->Capture(live.View());
  w.Submit(Tmp("prio-2.tckpt"), RecordAt(2, Tmp("prio-2.tckpt")), {1});
  second.WaitForNotification();  // before Drain, which waits for it and so raises it
  ASSERT_TRUE(w.Drain().status.ok());
  absl::MutexLock lock(&mu);
  if (!CanLeaveIdle()) {
    // Not privileged to come back (a user namespace, RLIMIT_NICE 0): the
    // writer must never have gone idle, or nothing could raise it.
    EXPECT_EQ(at_start, (std::vector<int>{SCHED_OTHER, SCHED_OTHER}));
    EXPECT_EQ(mid_file, (std::vector<int>{SCHED_OTHER, SCHED_OTHER}));
  } else {
    EXPECT_EQ(at_start, (std::vector<int>{SCHED_IDLE, SCHED_IDLE}));
    EXPECT_EQ(mid_file, (std::vector<int>{SCHED_OTHER, SCHED_IDLE}))
        << "the waiting trainer did not raise the writer, or the next write stayed raised";
  }
  EXPECT_EQ(commits.steps, (std::vector<int64_t>{1, 2}));
}

// One rank's shard of a sharded checkpoint: `after_write` (rank 0's
// manifest) runs once the shard file is on disk and before the commit,
// which carries the shard's index; a failing `after_write` commits nothing.
TEST(BackgroundCheckpointTest, AfterWriteRunsBetweenTheFileAndTheShardCommit) {
  Live live;
  live.Advance();
  Commits commits;
  BackgroundCheckpointWriter w(BackgroundCheckpointOptions(), Recorder(&commits));
  const std::string path = Tmp("shard-1.tckpt");
  bool file_there = false;
  w.Acquire()->Capture(live.View());
  w.Submit(path, RecordAt(1, path), {/*generation=*/2, /*shard=*/1, /*shards=*/3}, [&] {
    file_there = checkpoint::ReadCheckpoint(path, {}).ok();
    return absl::OkStatus();
  });
  BackgroundCheckpointWriter::Outcome out = w.Drain();
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(file_there) << "after_write ran before the shard file was complete";
  EXPECT_EQ(commits.shards, std::vector<int>{103});
  EXPECT_EQ(commits.generations, std::vector<int64_t>{2});

  live.Advance();
  w.Acquire()->Capture(live.View());
  w.Submit(path, RecordAt(2, path), {2, 0, 3},
           [] { return absl::PermissionDeniedError("test hook: manifest not writable"); });
  out = w.Drain();
  EXPECT_EQ(out.status.code(), absl::StatusCode::kPermissionDenied) << out.status;
  EXPECT_EQ(commits.steps, std::vector<int64_t>{1}) << "step 2 was committed after all";
}

}  // namespace
}  // namespace worker
}  // namespace tandem
