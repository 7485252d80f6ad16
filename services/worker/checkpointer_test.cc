// Sharded checkpoints through the worker: trainers on threads with a real
// CoordinatorServer and DataServer (port 0, the Debian Fashion-MNIST files).
// zero2 at 4 workers writes one shard per rank and a manifest; the job
// resumes at 3 workers under zero1 (resharded) and then at 2 under
// allreduce (another strategy); a missing shard is an error naming the file
// that leaves the checkpoint as it was; compressed's residuals and (with
// momentum_correction=1) velocity travel with the checkpoint. Background
// checkpoints: checkpointer_background_test.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "common/sync/registry.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "services/worker/checkpoint_fixture.h"

namespace tandem {
namespace worker {
namespace {

// Sum of |x| over each rank's part of a state blob gathered on rank 0:
// `header` floats, then `ranks` parts of `n` floats each.
std::vector<double> PerRankMagnitude(const std::string& blob, int64_t header, int64_t n,
                                     int ranks) {
  std::vector<float> v(blob.size() / sizeof(float));
  std::memcpy(v.data(), blob.data(), v.size() * sizeof(float));
  std::vector<double> out(ranks, 0.0);
  for (int r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < n; ++i) out[r] += std::fabs(v[header + r * n + i]);
  }
  return out;
}

class ShardedCheckpointTest : public CheckpointFixture {};

TEST_F(ShardedCheckpointTest, Zero2AtFourResumesAtThreeUnderZero1ThenAtTwoUnderAllreduce) {
  const std::string state = TmpDir("state"), ckpt = TmpDir("ckpt");
  ASSERT_TRUE(MakeDirectories(state).ok());

  // 1. zero2, 4 workers, 6 steps: 4 shards and a manifest.
  StartCoordinator(4, state);
  std::vector<TrainerRun> one = RunTrainers(Options(4, "zero2", 6, ckpt));
  for (const TrainerRun& r : one) ASSERT_TRUE(r.result.ok()) << r.result.status();
  for (const TrainerRun& r : one) EXPECT_EQ(r.params, one[0].params);
  const std::string first = coordinator_->core().GetJobStatus().last_checkpoint().path();
  EXPECT_EQ(first, checkpoint::ManifestPath(ckpt, 6));
  checkpoint::ReadOptions any;
  absl::StatusOr<checkpoint::Manifest> m = checkpoint::ReadManifest(first, any);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shards.size(), 4u);
  EXPECT_EQ(m->strategy, "zero2");
  absl::StatusOr<checkpoint::Checkpoint> saved = checkpoint::ReadWholeCheckpoint(first, any);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->params, one[0].params) << "the shards together are the final parameters";
  EXPECT_EQ(saved->optimizer_name, "adamw");

  // 2. zero1, 3 workers, to step 10: resharded 4 -> 3.
  StartCoordinator(3, state);
  std::vector<TrainerRun> two = RunTrainers(Options(3, "zero1", 10, ckpt));
  for (const TrainerRun& r : two) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 10);
    EXPECT_EQ(r.params, two[0].params);
  }
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", first, " at step 6 ")));
  const std::string second = coordinator_->core().GetJobStatus().last_checkpoint().path();
  EXPECT_EQ(second, checkpoint::ManifestPath(ckpt, 10));
  m = checkpoint::ReadManifest(second, any);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shards.size(), 3u);
  EXPECT_NE(two[0].params, one[0].params) << "training continued";

  // 3. allreduce, 2 workers, to step 12: a ZeRO checkpoint into DDP; its
  // own checkpoint is one whole file.
  StartCoordinator(2, state);
  std::vector<TrainerRun> three = RunTrainers(Options(2, "allreduce", 12, ckpt));
  for (const TrainerRun& r : three) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 12);
  }
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", second, " at step 10 ")));
  const std::string third = coordinator_->core().GetJobStatus().last_checkpoint().path();
  EXPECT_TRUE(absl::EndsWith(third, "step-00000012.tckpt")) << third;
}

// zero3 through the worker: 4 workers write the zero1/2 shard files and
// manifest, every worker ends holding the whole trained vector (the
// gathered shards), and the job resumes at 2 under zero3 and then under
// allreduce.
TEST_F(ShardedCheckpointTest, Zero3AtFourResumesAtTwoThenUnderAllreduce) {
  const std::string state = TmpDir("state_z3"), ckpt = TmpDir("ckpt_z3");
  ASSERT_TRUE(MakeDirectories(state).ok());
  StartCoordinator(4, state);
  std::vector<TrainerRun> one = RunTrainers(Options(4, "zero3", 6, ckpt));
  for (const TrainerRun& r : one) ASSERT_TRUE(r.result.ok()) << r.result.status();
  for (const TrainerRun& r : one) EXPECT_EQ(r.params, one[0].params);
  const std::string first = coordinator_->core().GetJobStatus().last_checkpoint().path();
  EXPECT_EQ(first, checkpoint::ManifestPath(ckpt, 6));
  checkpoint::ReadOptions any;
  absl::StatusOr<checkpoint::Manifest> m = checkpoint::ReadManifest(first, any);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shards.size(), 4u);
  EXPECT_EQ(m->strategy, "zero3");
  absl::StatusOr<checkpoint::Checkpoint> saved = checkpoint::ReadWholeCheckpoint(first, any);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->params, one[0].params) << "the shards together are the final parameters";

  StartCoordinator(2, state);
  std::vector<TrainerRun> two = RunTrainers(Options(2, "zero3", 9, ckpt));
  for (const TrainerRun& r : two) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 9);
    EXPECT_EQ(r.params, two[0].params);
  }
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", first, " at step 6 ")));
  EXPECT_NE(two[0].params, one[0].params) << "training continued";
  const std::string second = coordinator_->core().GetJobStatus().last_checkpoint().path();
  EXPECT_EQ(second, checkpoint::ManifestPath(ckpt, 9));

  StartCoordinator(2, state);
  std::vector<TrainerRun> three = RunTrainers(Options(2, "allreduce", 11, ckpt));
  for (const TrainerRun& r : three) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 11);
  }
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", second, " at step 9 ")));
}

TEST_F(ShardedCheckpointTest, MissingShardIsAnErrorNamingItAndNothingIsOverwritten) {
  const std::string state = TmpDir("state_missing"), ckpt = TmpDir("ckpt_missing");
  ASSERT_TRUE(MakeDirectories(state).ok());
  StartCoordinator(2, state);
  std::vector<TrainerRun> one = RunTrainers(Options(2, "zero1", 4, ckpt));
  for (const TrainerRun& r : one) ASSERT_TRUE(r.result.ok()) << r.result.status();
  const std::string manifest = checkpoint::ManifestPath(ckpt, 4);
  const std::string gone = absl::StrCat(ckpt, "/", checkpoint::ShardFileName(4, 1, 2));
  ASSERT_EQ(std::remove(gone.c_str()), 0);
  const std::string before = *ReadFileToString(manifest);
  const std::string shard0 =
      *ReadFileToString(absl::StrCat(ckpt, "/", checkpoint::ShardFileName(4, 0, 2)));

  StartCoordinator(2, state);
  std::vector<TrainerRun> two = RunTrainers(Options(2, "zero1", 8, ckpt));
  ASSERT_FALSE(two[0].result.ok());
  EXPECT_TRUE(absl::StrContains(two[0].result.status().message(),
                                checkpoint::ShardFileName(4, 1, 2)))
      << two[0].result.status();
  EXPECT_FALSE(two[1].result.ok());
  EXPECT_EQ(*ReadFileToString(manifest), before);
  EXPECT_EQ(*ReadFileToString(absl::StrCat(ckpt, "/", checkpoint::ShardFileName(4, 0, 2))),
            shard0);
  EXPECT_FALSE(ReadFileToString(checkpoint::ManifestPath(ckpt, 8)).ok());
}

// `compressed` (issue 13): every rank's error-feedback residuals reach the
// checkpoint through rank 0 (SyncStateToHost and StateLoaded are
// collective), a resume at the same world size and one at another (the
// residuals reset) both train on.
TEST_F(ShardedCheckpointTest, CompressedResidualsTravelWithTheCheckpoint) {
  const std::string state = TmpDir("state_compressed"), ckpt = TmpDir("ckpt_compressed");
  ASSERT_TRUE(MakeDirectories(state).ok());
  StartCoordinator(2, state);
  std::vector<TrainerRun> one = RunTrainers(Options(2, "compressed", 4, ckpt));
  for (const TrainerRun& r : one) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(one[1].params, one[0].params);
  const std::string first = coordinator_->core().GetJobStatus().last_checkpoint().path();
  checkpoint::ReadOptions any;
  absl::StatusOr<checkpoint::Checkpoint> saved = checkpoint::ReadWholeCheckpoint(first, any);
  ASSERT_TRUE(saved.ok()) << saved.status();
  const std::string* residuals = saved->FindBlob("sync/compressed/residuals");
  ASSERT_NE(residuals, nullptr) << first << " has no residuals";
  const size_t floats = residuals->size() / sizeof(float);
  ASSERT_GT(floats, 0u);
  ASSERT_EQ(floats % 2, 0u) << "both ranks' residuals, the same length each";
  const std::vector<double> per_rank = PerRankMagnitude(*residuals, 0, floats / 2, 2);
  EXPECT_GT(per_rank[0], 0);
  EXPECT_GT(per_rank[1], 0) << "rank 1's residuals were gathered, not zeros";
  EXPECT_NE(saved->FindBlob("sync/compressed/meta"), nullptr);

  StartCoordinator(2, state);
  std::vector<TrainerRun> two = RunTrainers(Options(2, "compressed", 8, ckpt));
  for (const TrainerRun& t : two) {
    ASSERT_TRUE(t.result.ok()) << t.result.status();
    EXPECT_EQ(t.result->steps, 8);
  }
  EXPECT_EQ(two[1].params, two[0].params);
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", first, " at step 4 ")));

  StartCoordinator(3, state);
  std::vector<TrainerRun> three = RunTrainers(Options(3, "compressed", 10, ckpt));
  for (const TrainerRun& t : three) {
    ASSERT_TRUE(t.result.ok()) << t.result.status();
    EXPECT_EQ(t.result->steps, 10);
    EXPECT_EQ(t.params, three[0].params);
  }
}

// compressed momentum_correction=1 through the worker: the generation
// builds sgd without momentum (the strategy refuses one with momentum), the
// checkpoint holds both ranks' velocity and no momentum buffer, a resume
// continues, and a resume under a strategy that wants the optimizer's
// momentum buffer is a clear error.
TEST_F(ShardedCheckpointTest, MomentumCorrectionVelocityTravelsWithTheCheckpoint) {
  const std::string state = TmpDir("state_dgc"), ckpt = TmpDir("ckpt_dgc");
  ASSERT_TRUE(MakeDirectories(state).ok());
  auto options = [&](int steps, const std::string& strategy, const std::string& opt) {
    std::vector<TrainerOptions> all = Options(2, strategy, steps, ckpt);
    for (TrainerOptions& o : all) {
      o.optimizer = "sgd";
      o.momentum = 0.9;
      auto so = sync::ParseSyncOptions(strategy, absl::StrCat("bucket_cap_mb=0.01", opt));
      EXPECT_TRUE(so.ok()) << so.status();
      o.sync = *so;
    }
    return all;
  };
  const std::string dgc = ",codec=topk,k=0.05,momentum_correction=1,masking=1,warmup_steps=0";
  StartCoordinator(2, state);
  std::vector<TrainerRun> one = RunTrainers(options(4, "compressed", dgc));
  for (const TrainerRun& r : one) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(one[1].params, one[0].params);
  const std::string first = coordinator_->core().GetJobStatus().last_checkpoint().path();
  checkpoint::ReadOptions any;
  absl::StatusOr<checkpoint::Checkpoint> saved = checkpoint::ReadWholeCheckpoint(first, any);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->optimizer_name, "sgd");
  EXPECT_TRUE(saved->optimizer_state.empty()) << "the momentum is the strategy's, not sgd's";
  const std::string* velocity = saved->FindBlob("sync/compressed/velocity");
  ASSERT_NE(velocity, nullptr) << first << " has no velocity";
  const int64_t n = saved->total_params;
  ASSERT_EQ(static_cast<int64_t>(velocity->size() / sizeof(float)), 2 + 2 * n);
  const std::vector<double> per_rank = PerRankMagnitude(*velocity, 2, n, 2);
  EXPECT_GT(per_rank[0], 0);
  EXPECT_GT(per_rank[1], 0) << "rank 1's velocity was gathered, not zeros";

  StartCoordinator(2, state);
  std::vector<TrainerRun> two = RunTrainers(options(8, "compressed", dgc));
  for (const TrainerRun& t : two) {
    ASSERT_TRUE(t.result.ok()) << t.result.status();
    EXPECT_EQ(t.result->steps, 8);
  }
  EXPECT_EQ(two[1].params, two[0].params);
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", first, " at step 4 ")));

  // allreduce with --momentum 0.9 wants sgd's momentum buffer, which this
  // checkpoint does not have: an error saying what to resume with.
  StartCoordinator(2, state);
  std::vector<TrainerRun> three = RunTrainers(options(10, "allreduce", ""));
  ASSERT_FALSE(three[0].result.ok());
  EXPECT_TRUE(absl::StrContains(three[0].result.status().message(), "momentum_correction=1"))
      << three[0].result.status();
}

}  // namespace
}  // namespace worker
}  // namespace tandem
