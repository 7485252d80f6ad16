// Issue 12, test 3: a shard server SIGKILLed mid-run under `tandem local
// --sync hybrid --shard-servers 2 --keep-going`. The job finishes, every
// sample is trained on exactly once per epoch (the workers'
// --sample_log_dir logs, counting only the generation that each step's
// final version ran in), and the final parameters equal, byte for byte,
// those of an uninterrupted run of the same job.
//
// Why that is "an uninterrupted run resumed from the same checkpoint": the
// killed run resumes from its last committed checkpoint C (step s, read
// from its "resumed from" line); the uninterrupted run writes its own
// checkpoint at step s, and the test checks that file is byte-identical to
// C. So the uninterrupted run passes through exactly the state the killed
// run resumed from (parameters, the servers' optimizer state, the data
// cursor) and goes on from it without interruption; both must end in the
// same bytes. (Runs are deterministic: one node, one pusher per chunk, so
// the servers' sums do not depend on arrival order.) Checkpoints are
// written by the shard servers (SaveShard: one shard file each) with rank
// 0's manifest; the final checkpoints' files, written by both jobs at
// their last step, are compared whole.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kWorkers = 2;
constexpr int kBatch = 50;                // per worker: 2 x 50 divides 60,000
constexpr int kEpochs = 2;
constexpr int kSamples = 60000;           // Fashion-MNIST train
constexpr int kStepsPerEpoch = kSamples / (kWorkers * kBatch);
constexpr int kLastStep = kEpochs * kStepsPerEpoch;

std::vector<std::string> JobArgs(const std::string& run_dir, const std::string& samples,
                                 const std::string& sync_opt) {
  return {"local",
          absl::StrCat("--workers=", kWorkers),
          "--shard-servers=2",
          "--sync=hybrid",
          "--keep-going",
          "--model=mlp:784,64,10",
          absl::StrCat("--epochs=", kEpochs),
          absl::StrCat("--batch-size=", kBatch),
          "--log-every=25",
          "--checkpoint-every=100",
          // replicate=0: this test covers the disk path (a lost server with a
          // replica: tests/e2e:shard_server_replica_test).
          "--sync-opt=chunk_mb=0.05,timeout_s=20,replicate=0" + sync_opt,
          "--worker-arg=--sample_log_dir=" + samples,
          "--run-dir=" + run_dir};
}

// The manifest the job commits for `step`: the shard servers write one
// shard file each (SaveShard), rank 0 the manifest naming them.
std::string ManifestPath(const std::string& run_dir, int step) {
  return absl::StrFormat("%s/checkpoints/step-%08d.manifest", run_dir, step);
}

// Every file of the step's checkpoint (manifest and shards), names and
// bytes, in name order; empty when there is none.
std::string CheckpointFiles(const std::string& run_dir, int step) {
  const std::string dir = run_dir + "/checkpoints";
  const std::string prefix = absl::StrFormat("step-%08d.", step);
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, prefix)) names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string& n : names) absl::StrAppend(&all, n, "\n", ReadFile(dir + "/" + n));
  return all;
}

// Every sample exactly once per epoch, in the training the final model
// went through.
void ExpectEverySampleOncePerEpoch(const std::string& samples) {
  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < kWorkers; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  const std::map<int64_t, std::map<int64_t, int>> counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), static_cast<size_t>(kEpochs));
  for (const auto& [epoch, ids] : counts) {
    int lost = 0, repeated = 0;
    for (int64_t id = 0; id < kSamples; ++id) {
      auto it = ids.find(id);
      if (it == ids.end()) {
        ++lost;
      } else if (it->second > 1) {
        repeated += it->second - 1;
      }
    }
    EXPECT_EQ(ids.size(), static_cast<size_t>(kSamples)) << "epoch " << epoch;
    EXPECT_EQ(lost, 0) << "epoch " << epoch;
    EXPECT_EQ(repeated, 0) << "epoch " << epoch;
  }
}

// "" (fp32 pushes) or ",compress=int8" (int8 pushes whose error-feedback
// residuals travel in the checkpoint's first shard).
class ShardServerResumeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardServerResumeTest, KilledServerRunEndsInTheBytesOfAnUninterruptedRun) {
  const std::string opt = GetParam();
  const std::string tag = opt.empty() ? "fp32" : "int8";
  const std::string killed_dir = TmpPath("shard-resume-killed-" + tag);
  const std::string killed_samples = TmpPath("shard-resume-killed-samples-" + tag);
  ASSERT_EQ(mkdir(killed_samples.c_str(), 0755), 0);
  bool killed = false;
  int resumed_step = -1;
  std::string resumed_path;
  TandemRun a = RunTandem(JobArgs(killed_dir, killed_samples, opt), [&](const std::string& line) {
    // Between the checkpoints of steps 300 and 400 (a server lost while a
    // checkpoint is being written is another case: shard_server_failure_test).
    if (!killed && absl::StartsWith(line, "step 325/")) {
      const int pid = ReadPid(killed_dir, "shard-1");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
    // "resumed from <path> at step <s> ..."
    if (killed && resumed_step < 0 && absl::StartsWith(line, "resumed from ")) {
      const std::string rest = line.substr(13);
      const size_t at = rest.find(" at step ");
      ASSERT_NE(at, std::string::npos) << line;
      resumed_path = rest.substr(0, at);
      const std::string tail = rest.substr(at + 9);
      ASSERT_TRUE(absl::SimpleAtoi(tail.substr(0, tail.find(' ')), &resumed_step)) << line;
    }
  });
  ASSERT_TRUE(killed) << a.stdout_text << a.stderr_text;
  ASSERT_EQ(a.exit_code, 0) << a.stdout_text << a.stderr_text;
  EXPECT_TRUE(absl::StrContains(a.stdout_text, "killed by signal 9")) << a.stdout_text;
  EXPECT_TRUE(absl::StrContains(a.stdout_text, "restarting it on")) << a.stdout_text;
  ASSERT_GT(resumed_step, 0) << "the job never resumed from a checkpoint:\n" << a.stdout_text;
  EXPECT_LT(resumed_step, kLastStep);
  EXPECT_EQ(resumed_path, ManifestPath(killed_dir, resumed_step));
  // Written by the servers: a manifest and one shard file per server.
  EXPECT_NE(CheckpointFiles(killed_dir, resumed_step).find(".shard-00001-of-00002.tckpt"),
            std::string::npos);
  ExpectEverySampleOncePerEpoch(killed_samples);
  // replicate=0 is the way off, and rank 0 says so when the job starts.
  EXPECT_TRUE(absl::StrContains(ReadFile(killed_dir + "/worker-0.log"),
                                "hybrid: shard-server replicas off (--sync_opt replicate=0)"))
      << ReadFile(killed_dir + "/worker-0.log");

  // The same job, never interrupted.
  const std::string plain_dir = TmpPath("shard-resume-plain-" + tag);
  const std::string plain_samples = TmpPath("shard-resume-plain-samples-" + tag);
  ASSERT_EQ(mkdir(plain_samples.c_str(), 0755), 0);
  TandemRun b = RunTandem(JobArgs(plain_dir, plain_samples, opt), nullptr);
  ASSERT_EQ(b.exit_code, 0) << b.stdout_text << b.stderr_text;
  EXPECT_FALSE(absl::StrContains(b.stdout_text, "resumed from")) << b.stdout_text;
  ExpectEverySampleOncePerEpoch(plain_samples);

  // It passed through the very checkpoint the killed run resumed from...
  const std::string resumed_from = CheckpointFiles(killed_dir, resumed_step);
  ASSERT_FALSE(resumed_from.empty()) << resumed_path;
  EXPECT_TRUE(CheckpointFiles(plain_dir, resumed_step) == resumed_from)
      << "the uninterrupted run's checkpoint at step " << resumed_step
      << " differs from the one the killed run resumed from";
  // ...and both end in the same bytes: parameters, the servers' optimizer
  // state and the data cursor of the final checkpoint.
  const std::string killed_final = CheckpointFiles(killed_dir, kLastStep);
  const std::string plain_final = CheckpointFiles(plain_dir, kLastStep);
  ASSERT_FALSE(killed_final.empty());
  ASSERT_FALSE(plain_final.empty());
  EXPECT_TRUE(killed_final == plain_final)
      << "final checkpoints differ (" << killed_final.size() << " vs " << plain_final.size()
      << " bytes)";
  // The final loss lines agree too (a readable symptom when the bytes do not).
  const auto last_line = [](const std::string& out) {
    const size_t at = out.rfind(absl::StrCat("step ", kLastStep, "/"));
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const std::string la = last_line(a.stdout_text), lb = last_line(b.stdout_text);
  ASSERT_FALSE(la.empty());
  std::printf("%s: killed shard-1 at step 325, resumed from step %d; final checkpoints %zu bytes, "
              "equal: %d\n  killed: %s\n  plain:  %s\n",
              tag.c_str(), resumed_step, killed_final.size(), killed_final == plain_final, la.c_str(),
              lb.c_str());
  EXPECT_EQ(la.substr(0, la.find(" lr ")), lb.substr(0, lb.find(" lr ")));
}

INSTANTIATE_TEST_SUITE_P(Pushes, ShardServerResumeTest, ::testing::Values("", ",compress=int8"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.empty() ? std::string("fp32") : std::string("int8");
                         });

}  // namespace
}  // namespace e2e
}  // namespace tandem
