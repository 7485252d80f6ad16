// End-to-end: mlp:784,1024,1024,10 trained single-process on the real
// Fashion-MNIST (Debian dataset-fashion-mnist) for 2 epochs, batch 64, SGD
// with momentum 0.9 (written inline over the flat vectors; common/optim owns
// the real optimizers), must reach >= 85% test accuracy. One OpenBLAS thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "common/data/idx.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

constexpr char kDir[] = "/usr/share/datasets/fashion-mnist/";

struct Split {
  std::vector<float> images;   // [n, 784], standardised
  std::vector<int32_t> labels;
  int n = 0;
};

Split Load(const std::string& images, const std::string& labels) {
  Split s;
  absl::StatusOr<data::IdxArray> im = data::ReadIdxFile(kDir + images);
  absl::StatusOr<data::IdxArray> lb = data::ReadIdxFile(kDir + labels);
  EXPECT_TRUE(im.ok()) << im.status();
  EXPECT_TRUE(lb.ok()) << lb.status();
  if (!im.ok() || !lb.ok()) return s;
  s.n = static_cast<int>(im->num_items());
  EXPECT_EQ(im->item_bytes(), 784);
  EXPECT_EQ(lb->num_items(), s.n);
  s.images.resize(im->data.size());
  // Fashion-MNIST pixel mean / std.
  for (size_t i = 0; i < im->data.size(); ++i) {
    s.images[i] = (im->data[i] / 255.f - 0.2860f) / 0.3530f;
  }
  s.labels.assign(lb->data.begin(), lb->data.end());
  return s;
}

TEST(MlpFashionMnistTest, TwoEpochsReach85PercentTestAccuracy) {
  Split train = Load("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
  Split test = Load("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");
  ASSERT_EQ(train.n, 60000);
  ASSERT_EQ(test.n, 10000);

  kernels::CpuBackend backend;  // one OpenBLAS thread (the default)
  const int batch = 64;
  ModelOptions opts;
  opts.max_batch = batch;
  opts.seed = 1;
  auto model = CreateModel("mlp:784,1024,1024,10", &backend, opts);
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  float* params = m.storage().params();
  const float* grads = m.storage().grads();
  const int64_t n = m.storage().size();
  std::vector<float> velocity(n, 0.f);
  const float lr = 0.05f, momentum = 0.9f;

  std::vector<float> x(static_cast<size_t>(batch) * 784);
  std::vector<int32_t> y(batch);
  std::vector<int> order(train.n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(123);
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0;
    int steps = 0;
    for (int lo = 0; lo + batch <= train.n; lo += batch) {
      for (int i = 0; i < batch; ++i) {
        const int s = order[lo + i];
        std::copy_n(&train.images[static_cast<size_t>(s) * 784], 784, &x[i * 784]);
        y[i] = train.labels[s];
      }
      Batch b;
      b.size = batch;
      b.features = x.data();
      b.labels = y.data();
      ASSERT_TRUE(m.Forward(b).ok());
      ASSERT_TRUE(m.Backward(0.f, nullptr).ok());
      loss_sum += *m.loss();
      ++steps;
      for (int64_t i = 0; i < n; ++i) {
        velocity[i] = momentum * velocity[i] + grads[i];
        params[i] -= lr * velocity[i];
      }
    }
    std::printf("epoch %d: mean train loss %.4f over %d steps\n", epoch,
                loss_sum / steps, steps);
  }
  const double seconds = std::chrono::duration<double>(
      std::chrono::steady_clock::now() - start).count();

  int correct = 0;
  std::vector<int32_t> pred(batch);
  for (int lo = 0; lo < test.n; lo += batch) {
    const int count = std::min(batch, test.n - lo);
    Batch b;
    b.size = count;
    b.features = &test.images[static_cast<size_t>(lo) * 784];
    b.labels = &test.labels[lo];
    ASSERT_TRUE(m.Forward(b).ok());
    backend.ArgmaxRows(count, 10, m.probs(), pred.data());
    for (int i = 0; i < count; ++i) correct += pred[i] == test.labels[lo + i];
  }
  const double accuracy = static_cast<double>(correct) / test.n;
  std::printf("test accuracy %.4f after 2 epochs (%.1f s training)\n", accuracy,
              seconds);
  EXPECT_GE(accuracy, 0.85);
}

}  // namespace
}  // namespace nn
}  // namespace tandem
