// Issue 9 part 8: a tiny GPT learns the fortunes text. The Debian package's
// files are converted by tools/convert (byte tokens, ctx-32 windows, last 5%
// = eval), drawn through the data server's BatchStream with shuffling, and
// trained on one process with AdamW on the CPU backend. The mean training
// loss of the last steps and the loss on held-out eval windows must fall
// well below the ln(256) = 5.55 of an untrained byte model.
//
// Skipped (with the reason) when /usr/share/games/fortunes is missing;
// tools/setup.sh installs it.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "gtest/gtest.h"
#include "common/data/dataset.h"
#include "tests/gpt/text_batches.h"
#include "tools/convert/convert.h"

namespace tandem {
namespace {

constexpr char kFortunes[] = "/usr/share/games/fortunes";
constexpr char kSpec[] = "gpt:layers=2,heads=2,width=64,context=32,vocab=256";
constexpr int kContext = 32;
constexpr int kBatch = 16;
constexpr int kSteps = 400;
constexpr int kTail = 30;        // steps averaged for the final training loss
constexpr int kEvalBatches = 8;  // eval windows: 8 x 16

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(p.c_str(), 0755);
  return p;
}

v1::StreamBatchesRequest Request(bool shuffle) {
  v1::StreamBatchesRequest r;
  r.set_seed(1);
  r.set_global_batch_size(kBatch);
  r.set_world_size(1);
  r.set_shuffle(shuffle);
  return r;
}

TEST(GptFortunes, LossFallsOnTheTextSet) {
  auto files = convert::TextFilesIn(kFortunes);
  if (!files.ok()) {
    GTEST_SKIP() << files.status() << " (tools/setup.sh installs the Debian package fortunes)";
  }
  convert::TextOptions o;
  o.seq_len = kContext;
  auto converted = convert::TextToShards(
      *files, o, {.out_dir = TmpDir("train"), .name = "fortunes"},
      {.out_dir = TmpDir("eval"), .name = "fortunes"});
  ASSERT_TRUE(converted.ok()) << converted.status();
  auto train = data::OpenDataset("fortunes/train", TmpDir("train"));
  auto eval = data::OpenDataset("fortunes/eval", TmpDir("eval"));
  ASSERT_TRUE(train.ok() && eval.ok()) << train.status() << eval.status();
  ASSERT_GE((*eval)->num_samples(), kEvalBatches * kBatch);

  auto batches = gpt_testing::DrawBatches(**train, Request(true), kSteps);
  ASSERT_TRUE(batches.ok()) << batches.status();
  auto eval_batches = gpt_testing::DrawBatches(**eval, Request(false), kEvalBatches);
  ASSERT_TRUE(eval_batches.ok()) << eval_batches.status();

  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 5;
  auto model = nn::CreateModel(kSpec, &backend, mo);
  ASSERT_TRUE(model.ok()) << model.status();
  nn::Model& m = **model;
  tensor::FlatStorage& s = m.storage();
  optim::AdamWOptions ao;
  ao.weight_decay = 0.0f;
  auto opt = optim::AdamW::Create({0, s.size()}, ao);
  ASSERT_TRUE(opt.ok()) << opt.status();

  auto eval_loss = [&]() {
    double sum = 0;
    for (const gpt_testing::TokenBatch& b : *eval_batches) {
      EXPECT_TRUE(m.Forward(b.view()).ok());
      sum += *m.loss();
    }
    return sum / eval_batches->size();
  };
  const double eval_before = eval_loss();

  std::vector<float> losses;
  for (int step = 1; step <= kSteps; ++step) {
    ASSERT_TRUE(m.Forward((*batches)[step - 1].view()).ok());
    losses.push_back(*m.loss());
    ASSERT_TRUE(std::isfinite(losses.back())) << "step " << step;
    ASSERT_TRUE(m.Backward(0.f, nullptr).ok());
    optim::StepContext ctx;
    ctx.step = step;
    // Short warmup, then linear decay to a tenth.
    ctx.lr = 1e-2f * std::min(1.0f, step / 20.0f) * (1.0f - 0.9f * step / kSteps);
    ASSERT_TRUE((*opt)->Step(s.params(), s.grads(), s.size(), ctx).ok());
  }
  const double first = losses.front();
  const double last =
      std::accumulate(losses.end() - kTail, losses.end(), 0.0) / kTail;
  const double eval_after = eval_loss();
  std::printf("%s on %ld fortunes windows: train loss %.3f -> %.3f (mean of last %d), "
              "eval loss %.3f -> %.3f (ln 256 = %.3f)\n",
              kSpec, static_cast<long>((*train)->num_samples()), first, last, kTail,
              eval_before, eval_after, std::log(256.0));
  EXPECT_NEAR(first, std::log(256.0), 0.3);  // an untrained byte model
  EXPECT_NEAR(eval_before, std::log(256.0), 0.3);
  EXPECT_LT(last, 3.1);
  EXPECT_LT(eval_after, 3.1);
}

}  // namespace
}  // namespace tandem
