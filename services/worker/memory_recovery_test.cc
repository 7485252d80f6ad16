// Recovery from memory through the worker (issue 34 items 1 and 2): trainers
// on threads with a real CoordinatorServer (liveness on, 50 ms heartbeats)
// and DataServer (port 0, the Debian Fashion-MNIST files), allreduce with
// SGD momentum.
//
//  - A worker lost after step 5 of 3 (crash_after_step: it returns without
//    leaving, as a killed process looks to its peers): the survivors agree
//    on step 5, continue from their own memory (nothing sent, 0 steps
//    redone) at world 2, train each sample once, and end with parameters
//    bit-identical to a run that trains 5 steps at world 3, checkpoints,
//    and continues at world 2 from that checkpoint.
//  - A worker added to 2 mid-epoch: the coordinator ends the generation at
//    the next step boundary S, the new rank receives the state from rank 0
//    (0 steps redone, the LR rescaled for world 3), and the final parameters
//    equal 2 workers to S, then 3 workers from that checkpoint.
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/sample_log.h"
#include "services/worker/trainer_threads.h"

namespace tandem {
namespace worker {
namespace {

constexpr int64_t kSteps = 12;

std::string TmpDir(const std::string& name) {
  std::string d = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  EXPECT_TRUE(MakeDirectories(d).ok());
  return d;
}

class MemoryRecoveryTest : public ::testing::Test {
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
    o.coordinator.heartbeat_period = absl::Milliseconds(50);
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
    o.checkpoint_every = 0;
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
    for (int i = 0; i < before; ++i) first.push_back(Options(i, step, ckpt, samples));
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

  static dataserver::DataServer* data_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

dataserver::DataServer* MemoryRecoveryTest::data_ = nullptr;

// The step S of "recovered from memory at step S ...", or -1.
int64_t RecoveredStep(const std::string& line) {
  const std::string prefix = "recovered from memory at step ";
  if (!absl::StartsWith(line, prefix)) return -1;
  const std::string rest = line.substr(prefix.size());
  int64_t s = -1;
  return absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &s) ? s : -1;
}

// Every sample at most once, and the same samples as the reference.
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

TEST_F(MemoryRecoveryTest, SurvivorsOfALostWorkerContinueFromMemory) {
  const std::string state = TmpDir("lost_state"), samples = TmpDir("lost_samples");
  StartCoordinator(2, 3, absl::Seconds(2), state);
  std::vector<TrainerOptions> o;
  for (int i = 0; i < 3; ++i) o.push_back(Options(i, kSteps, TmpDir("lost_ckpt"), samples));
  o[2].crash_after_step = 5;
  std::vector<TrainerRun> runs = RunTrainers(o);
  ASSERT_FALSE(runs[2].result.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(runs[i].result.ok()) << runs[i].result.status();
    EXPECT_EQ(runs[i].result->steps, kSteps);
    EXPECT_EQ(runs[i].result->generations, 2);
  }
  EXPECT_EQ(runs[0].params, runs[1].params);
  const std::string recovered = Line("recovered from memory");
  EXPECT_TRUE(absl::StartsWith(recovered, "recovered from memory at step 5 (0 steps redone)"))
      << recovered;
  EXPECT_TRUE(absl::StrContains(recovered, "with 2 worker(s); state sent from rank 0 to 0 rank(s)"))
      << recovered;
  EXPECT_EQ(Line("resumed from"), "");

  // The reference: 5 steps at world 3, a checkpoint, world 2 from it.
  const std::string ref_samples = TmpDir("lost_ref_samples");
  std::vector<TrainerRun> ref = ThroughTheDisk("lost_ref", 3, 5, 2, ref_samples);
  ASSERT_EQ(ref.size(), 2u);
  ASSERT_EQ(runs[0].params.size(), ref[0].params.size());
  EXPECT_TRUE(runs[0].params == ref[0].params)
      << "recovered from memory != dropped the worker at step 5 via the disk";
  ExpectSameSamplesOnce(Samples(samples, 3), Samples(ref_samples, 3));
}

TEST_F(MemoryRecoveryTest, AnAddedWorkerReceivesTheStateAndNothingIsRedone) {
  const std::string state = TmpDir("add_state"), samples = TmpDir("add_samples");
  const std::string ckpt = TmpDir("add_ckpt");
  StartCoordinator(2, 3, absl::Milliseconds(200), state);
  absl::Notification step4;
  std::vector<TrainerOptions> two;
  for (int i = 0; i < 2; ++i) {
    two.push_back(Options(i, kSteps, ckpt, samples));
    const auto print = two.back().progress;
    two.back().progress = [this, print, &step4](const std::string& line) {
      print(line);
      if (!absl::StartsWith(line, "step 4/") || step4.HasBeenNotified()) return;
      step4.Notify();
      // Rank 0 holds here (its peer waits in the next collective) until
      // the third worker's join has ended generation 1, then a few
      // heartbeat periods more, for its heartbeat to bring the re-join: the
      // job grows mid-run (the test reads the step it grew at; holding
      // shorter only moves that step later).
      while (coordinator_->core().GetJobStatus().state() == v1::GetJobStatusResponse::RUNNING) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      absl::SleepFor(absl::Milliseconds(250));
    };
  }
  std::vector<TrainerRun> runs, added;
  std::thread main_ranks([&] { runs = RunTrainers(two); });
  step4.WaitForNotification();
  added = RunTrainers({Options(2, kSteps, ckpt, samples)});
  main_ranks.join();
  for (const TrainerRun& r : runs) ASSERT_TRUE(r.result.ok()) << r.result.status();
  ASSERT_TRUE(added[0].result.ok()) << added[0].result.status();
  EXPECT_EQ(added[0].params, runs[0].params);
  const std::string recovered = Line("recovered from memory");
  const int64_t s = RecoveredStep(recovered);
  ASSERT_GE(s, 4) << recovered;
  ASSERT_LT(s, kSteps) << recovered << "\n" << AllLines();
  EXPECT_TRUE(absl::StrContains(recovered, " (0 steps redone)")) << recovered;
  EXPECT_TRUE(absl::StrContains(recovered, "with 3 worker(s); state sent from rank 0 to 1 rank(s)"))
      << recovered;
  // LR x world (linear): 0.05 x 2, then x 3.
  EXPECT_NE(Line("lr 0.1000 "), "");
  EXPECT_NE(Line("lr 0.1500 "), "");

  // The reference: 2 workers to S, a checkpoint, 3 workers from it.
  const std::string ref_samples = TmpDir("add_ref_samples");
  std::vector<TrainerRun> ref = ThroughTheDisk("add_ref", 2, s, 3, ref_samples);
  ASSERT_EQ(ref.size(), 3u);
  EXPECT_TRUE(runs[0].params == ref[0].params)
      << "scale-up from memory != 2 workers to step " << s << ", then 3 from the checkpoint";
  ExpectSameSamplesOnce(Samples(samples, 3), Samples(ref_samples, 3));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
