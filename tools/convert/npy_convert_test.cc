// .npy arrays -> shards -> the data server's batches: the bytes served are
// the bytes the arrays held, and bad arrays are refused before anything is
// written.
#include "tools/convert/npy_convert.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/match.h"
#include "common/data/dataset.h"
#include "common/data/npy.h"
#include "gtest/gtest.h"
#include "services/dataserver/batch_stream.h"

namespace tandem {
namespace convert {
namespace {

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(path.c_str(), 0755);
  return path;
}

int Entries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// An array of `shape` and `dtype` filled with seeded random bytes.
data::NpyArray RandomArray(data::NpyDType dtype, std::vector<int64_t> shape, uint32_t seed) {
  data::NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(a.elements() * data::NpyDTypeSize(dtype));
  std::mt19937 rng(seed);
  for (char& c : a.data) c = static_cast<char>(rng());
  return a;
}

data::NpyArray Labels(data::NpyDType dtype, int64_t n, int classes, uint32_t seed) {
  data::NpyArray a;
  a.dtype = dtype;
  a.shape = {n};
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % classes);
    if (dtype == data::NpyDType::kInt64) {
      a.data.append(reinterpret_cast<const char*>(&v), 8);
    } else {
      const int32_t v32 = static_cast<int32_t>(v);
      a.data.append(reinterpret_cast<const char*>(&v32), 4);
    }
  }
  return a;
}

int64_t LabelAt(const data::NpyArray& y, int64_t i) {
  if (y.dtype == data::NpyDType::kInt64) {
    int64_t v;
    std::memcpy(&v, y.data.data() + 8 * i, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, y.data.data() + 4 * i, 4);
  return v;
}

NpyPair Save(const std::string& dir, const std::string& stem, const data::NpyArray& x,
             const data::NpyArray& y) {
  NpyPair p{dir + "/" + stem + "_x.npy", dir + "/" + stem + "_y.npy"};
  EXPECT_TRUE(data::WriteNpyFile(p.features, x).ok());
  EXPECT_TRUE(data::WriteNpyFile(p.labels, y).ok());
  return p;
}

struct Case {
  data::NpyDType dtype;
  v1::DType want;
  std::vector<int64_t> sample_shape;
  data::NpyDType label_dtype;
};

TEST(NpyConvertTest, BytesInAreBytesServedForEveryDtype) {
  const Case cases[] = {
      {data::NpyDType::kFloat32, v1::DTYPE_F32, {2, 3}, data::NpyDType::kInt64},
      {data::NpyDType::kUInt8, v1::DTYPE_U8, {1, 4, 4}, data::NpyDType::kInt32},
      {data::NpyDType::kInt32, v1::DTYPE_I32, {5}, data::NpyDType::kInt64},
      {data::NpyDType::kInt64, v1::DTYPE_I64, {2, 1, 1, 2}, data::NpyDType::kInt32},
  };
  dataserver::ThreadPool pool(2);
  int k = 0;
  for (const Case& c : cases) {
    const std::string dir = TmpDir("rt" + std::to_string(k++));
    std::vector<int64_t> shape = {37};
    shape.insert(shape.end(), c.sample_shape.begin(), c.sample_shape.end());
    const data::NpyArray x = RandomArray(c.dtype, shape, 7 + k);
    const data::NpyArray y = Labels(c.label_dtype, 37, 6, 11 + k);
    NpySources src;
    src.train = Save(dir, "train", x, y);
    std::vector<int64_t> eshape = shape;
    eshape[0] = 9;
    src.eval = Save(dir, "eval", RandomArray(c.dtype, eshape, 3), Labels(c.label_dtype, 9, 6, 4));
    const std::string out = TmpDir("rt_out" + std::to_string(k));
    auto r = NpyToShards(src, {.out_dir = out, .name = "mine", .records_per_shard = 10});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->train.records, 37);
    EXPECT_EQ(r->train.files.size(), 4u);  // 10 records per shard
    EXPECT_EQ(r->eval.records, 9);

    auto ds = data::OpenDataset("mine/train", out + "/train");
    ASSERT_TRUE(ds.ok()) << ds.status();
    const v1::DatasetInfo& info = (*ds)->info();
    EXPECT_EQ(info.feature_spec().dtype(), c.want);
    EXPECT_EQ(std::vector<int64_t>(info.feature_spec().shape().begin(),
                                   info.feature_spec().shape().end()),
              c.sample_shape);
    EXPECT_EQ(info.label_spec().dtype(), v1::DTYPE_I32);
    EXPECT_EQ(info.label_spec().shape_size(), 0);
    EXPECT_GE(info.num_classes(), 1);
    EXPECT_LE(info.num_classes(), 6);

    v1::StreamBatchesRequest req;
    req.set_dataset("mine/train");
    req.set_global_batch_size(8);
    req.set_world_size(1);
    req.set_shuffle(true);
    req.set_seed(5);
    req.set_remainder(v1::SHORT_LAST);
    req.set_max_batches(5);  // one whole epoch of 37
    auto stream = dataserver::BatchStream::Create(ds->get(), req, &pool, {});
    ASSERT_TRUE(stream.ok()) << stream.status();
    const int64_t fb = (*ds)->feature_bytes();
    int64_t seen = 0;
    for (int b = 0; b < 5; ++b) {
      auto batch = (*stream)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      const v1::Batch& got = **batch;
      EXPECT_EQ(got.features().dtype(), c.want);
      EXPECT_EQ(got.features().shape_size(), 1 + static_cast<int>(c.sample_shape.size()));
      for (int i = 0; i < got.sample_ids_size(); ++i, ++seen) {
        const int64_t id = got.sample_ids(i);
        EXPECT_EQ(got.features().data().substr(i * fb, fb), x.data.substr(id * fb, fb)) << id;
        int32_t label;
        std::memcpy(&label, got.labels().data().data() + 4 * i, 4);
        EXPECT_EQ(label, LabelAt(y, id)) << id;
      }
      (*stream)->Release();
    }
    EXPECT_EQ(seen, 37);
  }
}

void ExpectRefused(const NpySources& src, const std::string& out, absl::StatusCode code,
                   const std::string& needle) {
  auto r = NpyToShards(src, {.out_dir = out});
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
  EXPECT_EQ(Entries(out), 0) << "wrote something for: " << needle;
}

TEST(NpyConvertTest, BadArraysAreRefusedBeforeAnythingIsWritten) {
  const std::string dir = TmpDir("bad");
  const std::string out = TmpDir("bad_out");
  const data::NpyArray x = RandomArray(data::NpyDType::kFloat32, {10, 3}, 1);
  const NpyPair good = Save(dir, "good", x, Labels(data::NpyDType::kInt64, 10, 3, 2));
  const NpyPair short_labels = Save(dir, "short", x, Labels(data::NpyDType::kInt32, 9, 3, 2));
  ExpectRefused({short_labels, {}}, out, absl::StatusCode::kInvalidArgument,
                "holds 9 labels but " + short_labels.features + " holds 10 samples");
  // The eval pair is checked too, before the train set is written.
  ExpectRefused({good, short_labels}, out, absl::StatusCode::kInvalidArgument, "holds 9 labels");
  const NpyPair float_labels =
      Save(dir, "fl", x, RandomArray(data::NpyDType::kFloat32, {10}, 3));
  ExpectRefused({float_labels, {}}, out, absl::StatusCode::kInvalidArgument,
                "labels must be integer class indices (int32 or int64), not float32");
  const NpyPair grid_labels = Save(dir, "gl", x, Labels(data::NpyDType::kInt32, 10, 3, 2));
  data::NpyArray two_d = Labels(data::NpyDType::kInt32, 10, 3, 2);
  two_d.shape = {5, 2};
  ASSERT_TRUE(data::WriteNpyFile(grid_labels.labels, two_d).ok());
  ExpectRefused({grid_labels, {}}, out, absl::StatusCode::kInvalidArgument, "1-D array");
  data::NpyArray negative = Labels(data::NpyDType::kInt64, 10, 3, 2);
  const int64_t minus_one = -1;
  std::memcpy(negative.data.data() + 8 * 4, &minus_one, 8);
  ExpectRefused({Save(dir, "neg", x, negative), {}}, out, absl::StatusCode::kInvalidArgument,
                "label -1 at index 4");
  const NpyPair other_shape = Save(dir, "wide", RandomArray(data::NpyDType::kFloat32, {10, 4}, 1),
                                   Labels(data::NpyDType::kInt64, 10, 3, 2));
  ExpectRefused({good, other_shape}, out, absl::StatusCode::kInvalidArgument,
                "eval samples are float32 (4,) but train samples");
  ExpectRefused({good, {good.features, ""}}, out, absl::StatusCode::kInvalidArgument,
                "both --eval_features and --eval_labels");
  ExpectRefused({{dir + "/none.npy", good.labels}, {}}, out, absl::StatusCode::kNotFound,
                dir + "/none.npy: no such file");
  const NpyPair empty = Save(dir, "empty", RandomArray(data::NpyDType::kFloat32, {0, 3}, 1),
                             Labels(data::NpyDType::kInt64, 0, 3, 2));
  ExpectRefused({empty, {}}, out, absl::StatusCode::kInvalidArgument, "hold no samples");
}

}  // namespace
}  // namespace convert
}  // namespace tandem
