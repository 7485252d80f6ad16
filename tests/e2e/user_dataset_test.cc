// End to end with the user's own arrays: .npy files generated here (fixed
// seed) are converted by `tandem convert --mode=npy` and trained on by
// `tandem local --dataset=DIR` (coordinator, data server and 2 workers as
// processes); a model that does not fit the files' description is refused
// before anything starts.
#include <unistd.h>

#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/data/npy.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kClasses = 4;

// n samples of f32 [1, 4, 4]: class c has quadrant c brighter than the
// rest, plus noise; labels int64.
void WriteArrays(const std::string& x_path, const std::string& y_path, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 0.3f);
  data::NpyArray x, y;
  x.dtype = data::NpyDType::kFloat32;
  x.shape = {n, 1, 4, 4};
  y.dtype = data::NpyDType::kInt64;
  y.shape = {n};
  for (int i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(rng() % kClasses);
    for (int r = 0; r < 4; ++r) {
      for (int col = 0; col < 4; ++col) {
        const int quadrant = (r / 2) * 2 + col / 2;
        const float v = (quadrant == c ? 1.f : 0.f) + noise(rng);
        x.data.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    y.data.append(reinterpret_cast<const char*>(&c), 8);
  }
  ASSERT_TRUE(data::WriteNpyFile(x_path, x).ok());
  ASSERT_TRUE(data::WriteNpyFile(y_path, y).ok());
}

// Converts train (512) and eval (128) arrays into TmpPath(name) with the
// tandem binary and returns the dataset directory.
std::string ConvertedDataset(const std::string& name) {
  const std::string src = TmpPath(name + "-arrays");
  mkdir(src.c_str(), 0755);
  WriteArrays(src + "/x.npy", src + "/y.npy", 512, 1);
  WriteArrays(src + "/xt.npy", src + "/yt.npy", 128, 2);
  const std::string out = TmpPath(name);
  TandemRun r = RunTandem({"convert", "--mode=npy", "--features=" + src + "/x.npy",
                           "--labels=" + src + "/y.npy", "--eval_features=" + src + "/xt.npy",
                           "--eval_labels=" + src + "/yt.npy", "--out_dir=" + out});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text,
                                "wrote 512 train samples (features f32 [1,4,4], 4 classes)"))
      << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "--model=mlp:16,256,4")) << r.stdout_text;
  return out;
}

TEST(UserDatasetTest, TandemLocalTrainsAnMlpOnConvertedArrays) {
  const std::string dataset = ConvertedDataset("mine");
  double accuracy = -1;
  int steps = 0;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--model=mlp:16,32,4", "--dataset=" + dataset, "--epochs=2",
       "--batch_size=16", "--lr=0.1", "--log_every=4", "--run_dir=" + TmpPath("mine-run")},
      [&](const std::string& line) {
        if (absl::StartsWith(line, "step ")) ++steps;
        std::vector<std::string> w = absl::StrSplit(line, ' ');
        if (w.size() >= 5 && w[0] == "epoch" && w[1] == "2" && w[2] == "test" &&
            w[3] == "accuracy") {
          ASSERT_TRUE(absl::SimpleAtod(w[4], &accuracy)) << line;
        }
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_GT(steps, 2) << r.stdout_text;
  // 32 steps of 32 samples on an easy rule: far above chance (0.25).
  EXPECT_GT(accuracy, 0.6) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "(128 samples)")) << r.stdout_text;
}

TEST(UserDatasetTest, AModelThatDoesNotFitTheFilesIsRefusedBeforeStarting) {
  const std::string dataset = ConvertedDataset("fit");
  const std::string run_dir = TmpPath("fit-run");
  TandemRun r = RunTandem({"local", "--workers=2", "--model=mlp:784,32,10",
                           "--dataset=" + dataset, "--run_dir=" + run_dir});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "samples [1,4,4]")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "use mlp:16,...,4")) << r.stderr_text;
  EXPECT_NE(access(run_dir.c_str(), F_OK), 0) << "run directory created for bad input";

  TandemRun none = RunTandem({"local", "--dataset=" + TmpPath("no-such-dir")});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(none.stderr_text, "tandem convert --mode=npy"))
      << none.stderr_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
