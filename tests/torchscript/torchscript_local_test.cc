// `tandem local --model torchscript:PATH` end to end (issue 29): worker
// processes train the example CNN (Conv2d, BatchNorm, pooling; scripted at
// build time from examples/cnn_fashion_mnist.py) on Fashion-MNIST.
//
//  - every strategy trains it a few steps (allreduce flat and hier=1, every
//    compressed codec, zero1, zero2, ps, hybrid; --precision bf16 and fp16),
//    and zero3 is refused naming the strategies that work;
//  - a worker killed under --keep-going is survived: the others re-join,
//    continue from their memory (the BatchNorm buffers broadcast from the
//    source rank) and finish; the final checkpoint carries the buffers;
//  - bad modules exit 2 before anything starts, naming file and problem;
//  - the example transformer trains on the fortunes text (token inputs).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr char kCnn[] = "--model=torchscript:common/torchscript/cnn.pt";

// The loss of every progress line ("step 3/6 epoch 1 loss 2.0139 ...").
std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "step ")) continue;
    std::vector<std::string> w = absl::StrSplit(line, ' ');
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      double v = 0;
      if (w[i] == "loss" && absl::SimpleAtod(w[i + 1], &v)) losses.push_back(v);
    }
  }
  return losses;
}

struct StrategyCase {
  std::string name;
  std::vector<std::string> flags;
};

class EveryStrategy : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(EveryStrategy, TrainsTheCnnAFewSteps) {
  const StrategyCase& c = GetParam();
  const std::string run_dir = TmpPath("strategy-" + c.name);
  std::vector<std::string> args = {"local", "--workers=2", kCnn, "--dataset=fashion-mnist",
                                   "--max-steps=6", "--batch-size=16", "--log-every=3",
                                   "--lr=0.05", "--run-dir=" + run_dir};
  args.insert(args.end(), c.flags.begin(), c.flags.end());
  TandemRun r = RunTandem(args);
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 6/6")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "2 of 2 workers exited cleanly")) << r.stdout_text;
  const std::vector<double> losses = Losses(r.stdout_text);
  ASSERT_EQ(losses.size(), 2u) << r.stdout_text;
  for (double l : losses) {
    EXPECT_TRUE(std::isfinite(l)) << r.stdout_text;
    EXPECT_LT(l, std::log(10.0) + 0.5) << r.stdout_text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, EveryStrategy,
    ::testing::Values(
        StrategyCase{"allreduce", {"--sync=allreduce"}},
        StrategyCase{"allreduce_hier", {"--sync=allreduce", "--sync-opt=hier=1"}},
        StrategyCase{"compressed_int8", {"--sync=compressed", "--sync-opt=codec=int8"}},
        StrategyCase{"compressed_fp16", {"--sync=compressed", "--sync-opt=codec=fp16"}},
        StrategyCase{"compressed_bf16", {"--sync=compressed", "--sync-opt=codec=bf16"}},
        StrategyCase{"compressed_topk", {"--sync=compressed", "--sync-opt=codec=topk,warmup_steps=0"}},
        StrategyCase{"compressed_threshold",
                     {"--sync=compressed", "--sync-opt=codec=threshold,warmup_steps=0"}},
        StrategyCase{"compressed_powersgd",
                     {"--sync=compressed", "--sync-opt=codec=powersgd,rank=2,warmup_steps=2"}},
        StrategyCase{"zero1", {"--sync=zero1"}},
        StrategyCase{"zero2", {"--sync=zero2", "--accumulation=2", "--sync-opt=max_grad_norm=1"}},
        StrategyCase{"ps", {"--sync=ps", "--shard-servers=2"}},
        StrategyCase{"hybrid", {"--sync=hybrid", "--shard-servers=2"}},
        StrategyCase{"bf16", {"--precision=bf16"}},
        StrategyCase{"fp16", {"--precision=fp16", "--optimizer=adamw", "--lr=0.001"}}),
    [](const ::testing::TestParamInfo<StrategyCase>& i) { return i.param.name; });

// The pre-LN transformer (int64 tokens in, [B, T, 256] logits out) on the
// fortunes text, 64-token windows: the token path through the worker.
TEST(TorchScriptTransformer, TrainsOnFortunesThroughTheWorkers) {
  const std::string run_dir = TmpPath("lm");
  TandemRun r = RunTandem({"local", "--workers=2", "--model=torchscript:common/torchscript/lm64.pt",
                           "--dataset=fortunes", "--max-steps=30", "--batch-size=16",
                           "--optimizer=adamw", "--lr=0.003", "--lr-scaling=none",
                           "--log-every=10", "--run-dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, " tokens/s ")) << r.stdout_text;
  const std::vector<double> losses = Losses(r.stdout_text);
  ASSERT_EQ(losses.size(), 3u) << r.stdout_text;
  // From ln(256) = 5.5 at the start; byte-level text is learnt fast.
  EXPECT_LT(losses.back(), 4.5) << r.stdout_text;
  EXPECT_LT(losses.back(), losses.front()) << r.stdout_text;
}

void ExpectRejected(const std::vector<std::string>& flags, const std::vector<std::string>& expected) {
  static int n = 0;
  const std::string run_dir = TmpPath(absl::StrCat("bad-", n++));
  std::vector<std::string> args = {"local", "--run-dir=" + run_dir};
  bool dataset = false;
  for (const std::string& f : flags) dataset = dataset || absl::StartsWith(f, "--dataset=");
  if (!dataset) args.push_back("--dataset=fashion-mnist");
  args.insert(args.end(), flags.begin(), flags.end());
  TandemRun r = RunTandem(args);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(absl::StartsWith(r.stderr_text, "tandem local: --model torchscript:")) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  for (const std::string& e : expected) {
    EXPECT_TRUE(absl::StrContains(r.stderr_text, e)) << "missing '" << e << "': " << r.stderr_text;
  }
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_NE(access(run_dir.c_str(), F_OK), 0) << "run directory created for bad input";
}

std::string Bad(const std::string& name) {
  return "--model=torchscript:common/torchscript/testdata/" + name + ".pt";
}

TEST(TorchScriptBadInput, EachBadModuleExits2BeforeAnythingStarts) {
  ExpectRejected({Bad("missing")}, {"missing.pt: no such file"});
  ExpectRejected({Bad("pickle")}, {"pickle.pt: not a TorchScript archive"});
  ExpectRejected({Bad("two_inputs")}, {"two_inputs.pt", "must take exactly one tensor"});
  ExpectRejected({Bad("no_params")}, {"no_params.pt", "no parameters"});
  ExpectRejected({Bad("int_params")}, {"int_params.pt", "parameter steps is Long"});
  ExpectRejected({Bad("seven_classes")}, {"seven_classes.pt", "10 classes"});
  ExpectRejected({Bad("wants_images")},
                 {"wants_images.pt", "forward failed on a batch of the dataset's samples",
                  "[-1, 3, 32, 32]"});
  ExpectRejected({kCnn, "--sync=zero3"}, {"zero3", "use allreduce", "zero2, ps or hybrid"});
}

// A dataset converted from .npy (tandem convert): the module receives the
// samples in their own shape and dtype, [B, 3, 8, 8] float32; the same
// images as int64 are rejected by the module's convolution before training,
// in tandem's words with the module's message attached.
TEST(TorchScriptTypedData, TheModuleGetsTheDatasetsShapeAndDtype) {
  const std::string dir = TmpPath("npy");
  const std::string py = absl::StrCat(
      "/usr/bin/python3 -c \"import numpy as np; r = np.random.default_rng(1); "
      "x = r.random((64, 3, 8, 8), dtype=np.float32); y = r.integers(0, 5, 64); "
      "np.save('", dir, "-x.npy', x); np.save('", dir, "-xl.npy', (x * 9).astype(np.int64)); "
      "np.save('", dir, "-y.npy', y)\"");
  ASSERT_EQ(std::system(py.c_str()), 0) << py;
  for (const char* x : {"x", "xl"}) {
    TandemRun c = RunTandem({"convert", "--mode=npy", absl::StrCat("--features=", dir, "-", x, ".npy"),
                             absl::StrCat("--labels=", dir, "-y.npy"),
                             absl::StrCat("--out_dir=", dir, "-", x)});
    ASSERT_EQ(c.exit_code, 0) << c.stdout_text << c.stderr_text;
  }
  TandemRun r = RunTandem({"local", "--workers=2", Bad("images_4d"), "--dataset=" + dir + "-x",
                           "--max-steps=4", "--batch-size=8", "--log-every=2",
                           "--run-dir=" + TmpPath("npy-run")});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 4/4")) << r.stdout_text;
  ExpectRejected({Bad("images_4d"), "--dataset=" + dir + "-xl"},
                 {"images_4d.pt", "forward failed on a batch of the dataset's samples",
                  "[2, 3, 8, 8] Long"});
}

TEST(TorchScriptWorkerFailure, AKilledWorkerIsSurvivedAndTheCheckpointCarriesTheBuffers) {
  const std::string run_dir = TmpPath("recover");
  bool killed = false;
  TandemRun r = RunTandem(
      {"local", "--workers=3", "--min-workers=2", "--keep-going", kCnn,
       "--dataset=fashion-mnist", "--max-steps=40", "--batch-size=16", "--log-every=5",
       "--checkpoint-every=10", "--heartbeat-ms=1000", "--settle-seconds=3",
       "--worker-arg=--rejoin_timeout_seconds=10", "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (!killed && absl::StartsWith(line, "step 15/")) {
          const int pid = ReadPid(run_dir, "worker-2");
          ASSERT_GT(pid, 0);
          ASSERT_EQ(kill(pid, SIGKILL), 0);
          killed = true;
        }
      });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  // From the survivors' memory (allreduce: every rank holds the whole state).
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "recovered from memory at step ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "with 2 worker(s)")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 40/40")) << r.stdout_text;
  auto c = checkpoint::ReadWholeCheckpoint(run_dir + "/checkpoints/step-00000040.tckpt", {});
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string* buffers = c->FindBlob("model_buffers");
  ASSERT_NE(buffers, nullptr);
  // Two BatchNorms: running mean and variance (16 + 32 floats each) and
  // their batch counters, with a size word per buffer.
  EXPECT_EQ(buffers->size(), 4u * (2 * 16 + 2 * 32) + 2 * 8 + 6 * 8);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
