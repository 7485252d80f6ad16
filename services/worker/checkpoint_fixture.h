// CheckpointFixture: trainers on threads with a real CoordinatorServer
// (port 0, liveness thread off) and a DataServer of the Debian
// Fashion-MNIST files, for the checkpoint tests (checkpointer_test,
// checkpointer_background_test).
//
//   class MyTest : public CheckpointFixture {};
//   TEST_F(MyTest, X) {
//     StartCoordinator(2, state_dir);
//     std::vector<TrainerRun> runs = RunTrainers(Options(2, "zero2", 6, ckpt_dir));
//     EXPECT_TRUE(Said("resumed from ..."));
//   }
//
// Test-only. The data server is shared by the suite; one coordinator at a
// time (StartCoordinator replaces it). Progress lines of every trainer are
// kept for Said (thread-safe).
#ifndef TANDEM_SERVICES_WORKER_CHECKPOINT_FIXTURE_H_
#define TANDEM_SERVICES_WORKER_CHECKPOINT_FIXTURE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/trainer_threads.h"

namespace tandem {
namespace worker {

// <TEST_TMPDIR>/<name>.
std::string TmpDir(const std::string& name);

// Over 1 MiB of parameters: a checkpoint file takes several write(2) calls,
// so a write hook can act mid-file.
inline constexpr char kBigMlp[] = "mlp:784,400,10";

// The coordinator state persisted in `state_dir` (a test failure if none).
v1::CoordinatorState SavedCoordinatorState(const std::string& state_dir);

// A write hook failing the `n`-th file it sees (0-based) after its first
// bytes, as a full disk would; `files` counts the files (outlives the hook).
checkpoint::WriteOptions FailFileMidWrite(int n, std::atomic<int>* files);

class CheckpointFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  // A coordinator for `workers` over `state` ("" for none), with the
  // finished flag of an earlier run cleared (an operator extending the job).
  void StartCoordinator(int workers, const std::string& state);
  // `workers` trainers of mlp:784,16,10 with AdamW, batch 16, under
  // `strategy` (bucket_cap_mb=0.01), to `max_steps`, checkpointing to `ckpt`.
  std::vector<TrainerOptions> Options(int workers, const std::string& strategy, int max_steps,
                                      const std::string& ckpt);
  // Options with kBigMlp, a checkpoint every `every` steps, background or not.
  std::vector<TrainerOptions> BigOptions(int workers, const std::string& strategy, int max_steps,
                                         const std::string& ckpt, int every, bool background);
  // Whether any trainer printed a line containing `text`.
  bool Said(const std::string& text);

  static dataserver::DataServer* data_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_CHECKPOINT_FIXTURE_H_
