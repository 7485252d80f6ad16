#include "services/dataserver/data_service.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "common/data/record_shard.h"
#include "common/rpc/channel.h"
#include "common/rpc/server.h"
#include "gtest/gtest.h"
#include "services/dataserver/data_server.h"

namespace tandem {
namespace dataserver {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// A shard dataset of n records: 8 feature bytes (the index) + i32 label.
std::string WriteShard(const std::string& name, int n) {
  v1::DatasetInfo info;
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
  info.mutable_feature_spec()->add_shape(8);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  const std::string path = TmpPath(name);
  auto w = data::RecordShardWriter::Create(path, data::EncodeShardMetadata(info));
  EXPECT_TRUE(w.ok());
  for (int64_t i = 0; i < n; ++i) {
    std::string rec(reinterpret_cast<const char*>(&i), 8);
    const int32_t label = static_cast<int32_t>(i % 10);
    rec.append(reinterpret_cast<const char*>(&label), 4);
    EXPECT_TRUE((*w)->Add(rec).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

class DataServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = WriteShard("good.tshard", 500);
    const std::string bad = WriteShard("bad.tshard", 500);
    // Corrupt record 300's payload (header 64 + metadata + 300 * 12).
    const std::string meta = data::EncodeShardMetadata([] {
      v1::DatasetInfo info;
      info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
      info.mutable_feature_spec()->add_shape(8);
      info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
      return info;
    }());
    bad_offset_ = data::kRecordShardHeaderBytes + meta.size() + 300 * 12;
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(bad_offset_);
    f.write("\x7f", 1);
    f.close();
    bad_ = bad;

    DataServerOptions options;
    options.datasets = {{"good", good_}, {"bad", bad_}};
    options.service.prefetch_depth = 2;
    options.service.decode_threads = 2;
    auto server = DataServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::DataServer::NewStub(MakeChannel({.target = server_->address()}));
  }

  v1::StreamBatchesRequest Request(const std::string& dataset) {
    v1::StreamBatchesRequest r;
    r.set_dataset(dataset);
    r.set_seed(3);
    r.set_global_batch_size(50);
    r.set_rank(0);
    r.set_world_size(2);
    r.set_shuffle(false);
    return r;
  }

  // Reads a whole stream; returns its status and the ids received.
  grpc::Status ReadAll(const v1::StreamBatchesRequest& r, std::vector<int64_t>* ids) {
    grpc::ClientContext ctx;
    auto reader = stub_->StreamBatches(&ctx, r);
    v1::Batch b;
    while (reader->Read(&b)) {
      for (int64_t id : b.sample_ids()) ids->push_back(id);
    }
    return reader->Finish();
  }

  std::string good_, bad_;
  long bad_offset_ = 0;
  std::unique_ptr<DataServer> server_;
  std::unique_ptr<v1::DataServer::Stub> stub_;
};

TEST_F(DataServiceTest, ListDatasets) {
  grpc::ClientContext ctx;
  v1::ListDatasetsResponse resp;
  ASSERT_TRUE(stub_->ListDatasets(&ctx, {}, &resp).ok());
  ASSERT_EQ(resp.datasets_size(), 2);
  EXPECT_EQ(resp.datasets(1).name(), "good");
  EXPECT_EQ(resp.datasets(1).num_samples(), 500);
  EXPECT_EQ(resp.datasets(1).feature_spec().shape(0), 8);
}

TEST_F(DataServiceTest, StreamsWholeSlicesWithPayload) {
  auto r = Request("good");
  r.set_max_batches(10);  // one epoch of 10 global batches
  grpc::ClientContext ctx;
  auto reader = stub_->StreamBatches(&ctx, r);
  v1::Batch b;
  int n = 0;
  while (reader->Read(&b)) {
    EXPECT_EQ(b.step_in_epoch(), n);
    EXPECT_EQ(b.last_in_epoch(), n == 9);
    ASSERT_EQ(b.sample_ids_size(), 25);
    EXPECT_EQ(b.features().shape(0), 25);
    for (int k = 0; k < 25; ++k) {
      EXPECT_EQ(b.sample_ids(k), n * 50 + k);  // rank 0: first half, in order
      int64_t v;
      memcpy(&v, b.features().data().data() + 8 * k, 8);
      EXPECT_EQ(v, b.sample_ids(k));
    }
    ++n;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(n, 10);
  const std::string scrape = server_->metrics()->Scrape();
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_data_batches_served_total")) << scrape;
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_data_open_streams"));
}

TEST_F(DataServiceTest, ErrorsArePerStreamAndOthersKeepServing) {
  std::vector<int64_t> ids;
  grpc::Status s = ReadAll(Request("nope"), &ids);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "good"));  // lists known ones

  auto rank = Request("good");
  rank.set_rank(2);
  EXPECT_EQ(ReadAll(rank, &ids).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto zero = Request("good");
  zero.set_global_batch_size(0);
  EXPECT_EQ(ReadAll(zero, &ids).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto past = Request("good");
  past.set_step_in_epoch(10);
  EXPECT_EQ(ReadAll(past, &ids).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A long stream on "good" runs while a stream on the corrupt shard fails.
  grpc::ClientContext long_ctx;
  auto long_req = Request("good");
  long_req.set_max_batches(40);
  auto long_reader = stub_->StreamBatches(&long_ctx, long_req);
  v1::Batch b;
  ASSERT_TRUE(long_reader->Read(&b));

  ids.clear();
  s = ReadAll(Request("bad"), &ids);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), bad_)) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), std::to_string(bad_offset_)))
      << s.error_message();
  EXPECT_EQ(ids.size(), 6u * 25u);  // batches 0..5 arrived; 6 holds record 300

  int more = 1;
  while (long_reader->Read(&b)) ++more;
  EXPECT_TRUE(long_reader->Finish().ok());
  EXPECT_EQ(more, 40);
}

TEST_F(DataServiceTest, CancelledClientReleasesTheStream) {
  {
    grpc::ClientContext ctx;
    auto reader = stub_->StreamBatches(&ctx, Request("good"));  // unlimited
    v1::Batch b;
    ASSERT_TRUE(reader->Read(&b));
    ctx.TryCancel();
    while (reader->Read(&b)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The server still serves new streams.
  std::vector<int64_t> ids;
  auto r = Request("good");
  r.set_max_batches(3);
  EXPECT_TRUE(ReadAll(r, &ids).ok());
  EXPECT_EQ(ids.size(), 75u);
}

// A language-model shard as tools/convert --mode=text writes it: record i
// holds tokens (i * 7 + k) % 256 for k in 0..ctx as features [ctx] and the
// next tokens as labels [ctx], both i32; vocabulary 256.
std::string WriteLmShard(const std::string& name, int n, int ctx) {
  v1::DatasetInfo info;
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_feature_spec()->add_shape(ctx);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_label_spec()->add_shape(ctx);
  info.set_num_classes(256);
  const std::string path = TmpPath(name);
  auto w = data::RecordShardWriter::Create(path, data::EncodeShardMetadata(info));
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> rec(2 * ctx);
    for (int k = 0; k < ctx; ++k) {
      rec[k] = (i * 7 + k) % 256;
      rec[ctx + k] = (i * 7 + k + 1) % 256;
    }
    EXPECT_TRUE((*w)->Add(std::string(reinterpret_cast<const char*>(rec.data()),
                                      rec.size() * 4)).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

TEST(DataServerLmTest, ServesTokenWindowsAsI32FeaturesAndLabels) {
  constexpr int kCtx = 16;
  DataServerOptions options;
  options.datasets = {{"text/train", WriteLmShard("lm.tshard", 100, kCtx)}};
  auto server = DataServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::DataServer::NewStub(MakeChannel({.target = (*server)->address()}));

  // What the worker reads to choose its model inputs.
  grpc::ClientContext list_ctx;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(stub->ListDatasets(&list_ctx, {}, &list).ok());
  ASSERT_EQ(list.datasets_size(), 1);
  const v1::DatasetInfo& info = list.datasets(0);
  EXPECT_EQ(info.name(), "text/train");
  EXPECT_EQ(info.num_samples(), 100);
  EXPECT_EQ(info.num_classes(), 256);
  EXPECT_EQ(info.feature_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ(std::vector<int64_t>(info.feature_spec().shape().begin(),
                                 info.feature_spec().shape().end()),
            std::vector<int64_t>{kCtx});
  EXPECT_EQ(info.label_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ(std::vector<int64_t>(info.label_spec().shape().begin(),
                                 info.label_spec().shape().end()),
            std::vector<int64_t>{kCtx});

  // Rank 1 of 2, global batch 8, shuffled: slices of 4 windows each.
  v1::StreamBatchesRequest r;
  r.set_dataset("text/train");
  r.set_seed(5);
  r.set_global_batch_size(8);
  r.set_rank(1);
  r.set_world_size(2);
  r.set_shuffle(true);
  r.set_max_batches(15);  // past the 12-batch epoch: crosses into epoch 1
  grpc::ClientContext ctx;
  auto reader = stub->StreamBatches(&ctx, r);
  v1::Batch b;
  int batches = 0;
  std::set<int64_t> epoch0;
  while (reader->Read(&b)) {
    ++batches;
    ASSERT_EQ(b.sample_ids_size(), 4);
    EXPECT_EQ(b.features().dtype(), v1::DTYPE_I32);
    EXPECT_EQ(b.labels().dtype(), v1::DTYPE_I32);
    EXPECT_EQ(std::vector<int64_t>(b.features().shape().begin(), b.features().shape().end()),
              (std::vector<int64_t>{4, kCtx}));
    EXPECT_EQ(std::vector<int64_t>(b.labels().shape().begin(), b.labels().shape().end()),
              (std::vector<int64_t>{4, kCtx}));
    ASSERT_EQ(b.features().data().size(), 4u * kCtx * 4);
    ASSERT_EQ(b.labels().data().size(), 4u * kCtx * 4);
    const int32_t* f = reinterpret_cast<const int32_t*>(b.features().data().data());
    const int32_t* l = reinterpret_cast<const int32_t*>(b.labels().data().data());
    for (int s = 0; s < 4; ++s) {
      const int64_t id = b.sample_ids(s);
      if (b.epoch() == 0) epoch0.insert(id);
      for (int k = 0; k < kCtx; ++k) {
        ASSERT_EQ(f[s * kCtx + k], (id * 7 + k) % 256) << "sample " << id << " token " << k;
        ASSERT_EQ(l[s * kCtx + k], (id * 7 + k + 1) % 256) << "sample " << id << " label " << k;
      }
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(batches, 15);
  EXPECT_EQ(epoch0.size(), 48u);  // 12 batches x 4, none repeated

  // normalize_to_f32 is for u8 pixels; on tokens it is refused, not garbled.
  r.set_normalize_to_f32(true);
  grpc::ClientContext bad_ctx;
  auto bad = stub->StreamBatches(&bad_ctx, r);
  while (bad->Read(&b)) {
  }
  const grpc::Status s = bad->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "DTYPE_I32")) << s.error_message();
}

TEST(DataServerTest, StartErrors) {
  DataServerOptions none;
  EXPECT_TRUE(absl::IsInvalidArgument(DataServer::Start(none).status()));
  DataServerOptions missing;
  missing.datasets = {{"x", TmpPath("missing-dir/nothing")}};
  EXPECT_TRUE(absl::IsNotFound(DataServer::Start(missing).status()));
  auto bare = ParseDatasetSpec("/data/mine/train");  // a path names itself
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->first, "/data/mine/train");
  EXPECT_EQ(bare->second, "/data/mine/train");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDatasetSpec("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDatasetSpec("=path").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDatasetSpec("name=").status()));
  auto ok = ParseDatasetSpec("a/b=/x=y");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "a/b");
  EXPECT_EQ(ok->second, "/x=y");
  DataServerOptions dup;
  const std::string p = WriteShard("dup.tshard", 10);
  dup.datasets = {{"d", p}, {"d", p}};
  EXPECT_TRUE(absl::IsInvalidArgument(DataServer::Start(dup).status()));
}

}  // namespace
}  // namespace dataserver
}  // namespace tandem
