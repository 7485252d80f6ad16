// The dataset's description carried end to end: .npy arrays converted into
// shards, served by a real data server, fetched by the worker's probe and
// prefetch client and staged into an nn::Batch whose typed view has the
// dataset's dtype and shape [B, *sample_shape] and the arrays' bytes.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/match.h"
#include "common/data/dataset_info_client.h"
#include "common/data/npy.h"
#include "common/data/prefetch_client.h"
#include "common/kernels/cpu_backend.h"
#include "gtest/gtest.h"
#include "services/dataserver/data_server.h"
#include "services/worker/batch_stager.h"
#include "services/worker/dataset_probe.h"
#include "tools/convert/npy_convert.h"

namespace tandem {
namespace worker {
namespace {

constexpr int kSamples = 24;
constexpr int kBatch = 8;

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(path.c_str(), 0755);
  return path;
}

// uint8 images [24, 1, 28, 28] with seeded bytes and labels i % 10, as
// .npy files converted into <dir>/out/train.
struct Images {
  data::NpyArray x;
  std::string train_dir;
};

Images ConvertedImages() {
  const std::string dir = TmpDir("typed");
  Images im;
  im.x.dtype = data::NpyDType::kUInt8;
  im.x.shape = {kSamples, 1, 28, 28};
  im.x.data.resize(kSamples * 784);
  std::mt19937 rng(3);
  for (char& c : im.x.data) c = static_cast<char>(rng());
  data::NpyArray y;
  y.dtype = data::NpyDType::kInt64;
  y.shape = {kSamples};
  for (int64_t i = 0; i < kSamples; ++i) {
    const int64_t label = i % 10;
    y.data.append(reinterpret_cast<const char*>(&label), 8);
  }
  convert::NpySources src;
  src.train = {dir + "/x.npy", dir + "/y.npy"};
  EXPECT_TRUE(data::WriteNpyFile(src.train.features, im.x).ok());
  EXPECT_TRUE(data::WriteNpyFile(src.train.labels, y).ok());
  const std::string out = TmpDir("typed/out");
  auto r = convert::NpyToShards(src, {.out_dir = out});
  EXPECT_TRUE(r.ok()) << r.status();
  im.train_dir = out + "/train";
  return im;
}

// Streams the first batch of `name` (natural order) from `server`.
std::unique_ptr<data::PrefetchClient> Stream(const std::string& server, const std::string& name,
                                             bool normalize) {
  data::PrefetchOptions o;
  o.servers = {server};
  o.request.set_dataset(name);
  o.request.set_global_batch_size(kBatch);
  o.request.set_world_size(1);
  o.request.set_max_batches(1);
  o.request.set_normalize_to_f32(normalize);
  auto client = data::PrefetchClient::Start(o);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

class TypedBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    images_ = ConvertedImages();
    dataserver::DataServerOptions o;
    o.datasets = {{images_.train_dir, images_.train_dir}};  // a path names itself
    auto server = dataserver::DataServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    RetryOptions retry;
    retry.max_attempts = 3;
    auto info = data::FetchDatasetInfo({server_->address()}, images_.train_dir, retry);
    ASSERT_TRUE(info.ok()) << info.status();
    info_ = *info;
  }

  // The first batch, streamed and staged for `spec` (valid while the
  // fixture's client and stager live).
  nn::Batch StageFirst(const InputSpec& spec) {
    auto stager = BatchStager::Create(&cpu_, spec, kBatch);
    EXPECT_TRUE(stager.ok()) << stager.status();
    if (!stager.ok()) return {};
    stager_ = *std::move(stager);
    client_ = Stream(server_->address(), images_.train_dir, spec.normalize_to_f32);
    if (client_ == nullptr) return {};
    auto host = client_->Next();
    EXPECT_TRUE(host.ok()) << host.status();
    if (!host.ok()) return {};
    auto b = stager_->Stage(**host);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nn::Batch{};
  }

  Images images_;
  std::unique_ptr<dataserver::DataServer> server_;
  v1::DatasetInfo info_;
  kernels::CpuBackend cpu_;
  std::unique_ptr<BatchStager> stager_;
  std::unique_ptr<data::PrefetchClient> client_;
};

TEST_F(TypedBatchTest, Uint8ImagesArriveAsUint8BatchOfTheirShape) {
  auto in = data::ClassifyDataset(info_);
  ASSERT_TRUE(in.ok()) << in.status();
  const nn::Batch staged = StageFirst(InputSpecFor(*in, /*normalize_to_f32=*/false));
  const nn::Batch* b = &staged;
  ASSERT_EQ(b->size, kBatch);
  EXPECT_EQ(b->inputs_dtype, nn::InputDType::kUInt8);
  ASSERT_EQ(b->sample_shape.rank, 3);
  EXPECT_EQ(b->sample_shape.dims[0], 1);
  EXPECT_EQ(b->sample_shape.dims[1], 28);
  EXPECT_EQ(b->sample_shape.dims[2], 28);
  EXPECT_EQ(b->label_shape.rank, 0);
  EXPECT_EQ(b->features, nullptr);  // not f32: the MLP's pointer stays unset
  EXPECT_EQ(b->tokens, nullptr);
  ASSERT_NE(b->inputs, nullptr);
  EXPECT_EQ(std::memcmp(b->inputs, images_.x.data.data(), kBatch * 784), 0);
  for (int i = 0; i < kBatch; ++i) EXPECT_EQ(b->labels[i], i % 10);
}

TEST_F(TypedBatchTest, AnMlpGetsTheSameImagesAsF32InTheUnitRange) {
  auto spec = MatchDataset(info_, *nn::ParseModelSpec("mlp:784,16,10"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->normalize_to_f32);
  const nn::Batch staged = StageFirst(*spec);
  const nn::Batch* b = &staged;
  ASSERT_EQ(b->size, kBatch);
  EXPECT_EQ(b->inputs_dtype, nn::InputDType::kFloat32);
  EXPECT_EQ(b->sample_shape.rank, 3);
  ASSERT_NE(b->features, nullptr);
  EXPECT_EQ(static_cast<const void*>(b->features), b->inputs);
  for (int k = 0; k < kBatch * 784; k += 97) {
    EXPECT_FLOAT_EQ(b->features[k], static_cast<uint8_t>(images_.x.data[k]) / 255.0f) << k;
  }
}

TEST_F(TypedBatchTest, AnMlpOfTheWrongWidthIsRefusedWithTheShape) {
  auto spec = MatchDataset(info_, *nn::ParseModelSpec("mlp:100,16,10"));
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << spec.status();
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "samples [1,28,28]")) << spec.status();
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "use mlp:784,...,10")) << spec.status();
}

}  // namespace
}  // namespace worker
}  // namespace tandem
