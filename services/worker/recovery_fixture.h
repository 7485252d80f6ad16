// Test fixture for recovery through the worker (issue 34): trainers on
// threads with a real CoordinatorServer (liveness on, 200 ms heartbeats) and
// DataServer (port 0, the Debian Fashion-MNIST files), a tiny MLP with SGD
// momentum; a reference run that changes the world through the disk; the
// sample-log checks. Used by memory_recovery_test (replicated strategies)
// and peer_recovery_test (sharded ones).
//
//   class MyTest : public RecoveryFixture {};
//   TEST_F(MyTest, X) { strategy_ = "zero1"; StartCoordinator(2, 3, ...); ... }
//
// Test-only; the trainers' progress callbacks may run on any thread (lines
// are guarded).
#ifndef TANDEM_SERVICES_WORKER_RECOVERY_FIXTURE_H_
#define TANDEM_SERVICES_WORKER_RECOVERY_FIXTURE_H_

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/sample_log.h"
#include "services/worker/trainer_threads.h"

namespace tandem {
namespace worker {

constexpr int64_t kSteps = 12;

inline std::string TmpDir(const std::string& name) {
  std::string d = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  EXPECT_TRUE(MakeDirectories(d).ok());
  return d;
}

class RecoveryFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = StartFashionMnistServer();
    ASSERT_TRUE(s.ok()) << s.status();
    data_ = s->release();
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  // A coordinator over `state` (its finished flag cleared: a job extended).
  void StartCoordinator(int min_workers, int max_workers, absl::Duration settle,
                        const std::string& state) {
    coordinator_.reset();
    ClearFinishedFlag(state);
    CoordinatorServerOptions o;
    o.coordinator.job_id = "mem-test";
    o.coordinator.min_workers = min_workers;
    o.coordinator.max_workers = max_workers;
    o.coordinator.settle_time = settle;
    // 200 ms: a rank starved for 150 ms on a loaded machine (load 40 seen)
    // must not end a generation the test did not fault.
    o.coordinator.heartbeat_period = absl::Milliseconds(200);
    o.coordinator.state_dir = state;
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    coordinator_ = std::move(*s);
  }

  TrainerOptions Options(int i, int64_t max_steps, const std::string& ckpt,
                         const std::string& samples) {
    TrainerOptions o;
    o.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    o.data_servers = {data_->address()};
    o.job_id = "mem-test";
    o.worker_id = absl::StrCat("w", i);
    o.model = "mlp:784,16,10";
    o.sync.strategy = strategy_;
    o.replica_every = replica_every_;
    // Which replica steps are held must not depend on how fast a loaded
    // machine schedules the background send (the asynchronous path runs
    // in tools/bench/faults.sh and peer_link_test).
    o.replica_synchronous = true;
    o.batch_size = 16;
    o.optimizer = "sgd";
    o.momentum = 0.9;
    o.lr = 0.05;
    o.lr_scaling = "linear";
    o.schedule = "constant";
    o.log_every = 1;
    o.eval_dataset = "";
    o.max_steps = max_steps;
    o.checkpoint_dir = ckpt;
    o.checkpoint_every = checkpoint_every_;
    o.sample_log_dir = samples;
    o.collective_timeout = absl::Seconds(60);
    o.rejoin_timeout = absl::Seconds(60);
    o.progress = [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
    return o;
  }

  // The first line containing `text` ("" if none).
  std::string Line(const std::string& text) {
    absl::MutexLock lock(&mu_);
    for (const std::string& l : lines_) {
      if (absl::StrContains(l, text)) return l;
    }
    return "";
  }
  std::string AllLines() {
    absl::MutexLock lock(&mu_);
    return absl::StrJoin(lines_, "\n");
  }
  void ClearLines() {
    absl::MutexLock lock(&mu_);
    lines_.clear();
  }

  // The reference for a change of world at `step`: `before` workers train
  // to it and checkpoint, then `after` fresh workers resume from the disk
  // to kSteps. The second phase's runs (empty after a failed assertion).
  std::vector<TrainerRun> ThroughTheDisk(const std::string& name, int before, int64_t step,
                                         int after, const std::string& samples) {
    ClearLines();
    const std::string state = TmpDir(name + "_state"), ckpt = TmpDir(name + "_ckpt");
    StartCoordinator(before, before, absl::ZeroDuration(), state);
    std::vector<TrainerOptions> first;
    for (int i = 0; i < before; ++i) {
      first.push_back(Options(i, step, ckpt, samples));
      first.back().checkpoint_every = 0;  // the reference's one checkpoint: at `step`
    }
    for (const TrainerRun& r : RunTrainers(first)) {
      EXPECT_TRUE(r.result.ok()) << r.result.status();
      if (!r.result.ok()) return {};
    }
    StartCoordinator(after, after, absl::ZeroDuration(), state);
    std::vector<TrainerOptions> second;
    for (int i = 0; i < after; ++i) second.push_back(Options(i, kSteps, ckpt, samples));
    std::vector<TrainerRun> runs = RunTrainers(second);
    for (const TrainerRun& r : runs) {
      EXPECT_TRUE(r.result.ok()) << r.result.status();
      if (!r.result.ok()) return {};
    }
    EXPECT_NE(Line(absl::StrCat("resumed from ", ckpt)), "");
    return runs;
  }

  // Effective samples of workers w0..w{n-1}: each id's count, per epoch.
  static std::map<int64_t, std::map<int64_t, int>> Samples(const std::string& dir, int n) {
    std::vector<SampleRecord> records;
    for (int w = 0; w < n; ++w) {
      EXPECT_TRUE(ReadSampleLog(absl::StrCat(dir, "/w", w, ".samples"), &records).ok());
    }
    return EffectiveSampleCounts(records);
  }

  // What Options() trains with (tests set them before the first call).
  std::string strategy_ = "allreduce";
  int replica_every_ = 5;
  int64_t checkpoint_every_ = 0;

  static dataserver::DataServer* data_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

inline // Every sample at most once, and the same samples as the reference.
void ExpectSameSamplesOnce(const std::map<int64_t, std::map<int64_t, int>>& got,
                           const std::map<int64_t, std::map<int64_t, int>>& reference) {
  int64_t total = 0;
  for (const auto& [epoch, ids] : got) {
    for (const auto& [id, n] : ids) {
      EXPECT_EQ(n, 1) << "sample " << id << " of epoch " << epoch;
      total += n;
    }
  }
  EXPECT_GT(total, 0);
  EXPECT_TRUE(got == reference) << "the recovered run trained on other samples";
}

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_RECOVERY_FIXTURE_H_
