// The shard server over real gRPC on port 0, through common/shard's client:
// init, two workers pushing every chunk on their own streams, a pull that
// waits for the step, refusals arriving as the store's codes, retries
// acknowledged, and the metrics counting bytes and steps.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint.h"
#include "common/codec/int8_codec.h"
#include "common/rpc/auth.h"
#include "common/shard/shard_client.h"
#include "common/shard/shard_layout.h"
#include "gtest/gtest.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kN = 1000;

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Fixture {
  std::unique_ptr<ShardServer> server;
  std::unique_ptr<shard::ShardClient> client;
  shard::ShardLayout layout = shard::ShardLayout::Create(kN, 1, 300).value();
};

Fixture Start() {
  Fixture f;
  f.server = ShardServer::Start({}).value();
  EXPECT_GT(f.server->port(), 0);
  f.client = shard::ShardClient::Create({f.server->address(), "job", absl::Seconds(20)}).value();
  return f;
}

shard::ShardInit Init(int world) {
  shard::ShardInit i;
  i.generation = 5;
  i.step = 0;
  i.range = {0, kN};
  i.chunk_elements = 300;
  i.world_size = world;
  i.optimizer.set_name("sgd");
  return i;
}

shard::PushHeader Header(int rank) {
  shard::PushHeader h;
  h.generation = 5;
  h.step = 1;
  h.rank = rank;
  h.learning_rate = 0.5;
  return h;
}

TEST(ShardService, TwoWorkersPushAndPullOverGrpc) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  absl::StatusOr<bool> kept = f.client->Init(Init(2), params.data());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(*kept);
  absl::StatusOr<v1::ShardInfo> info = f.client->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->chunks(), 4);  // 1000 in chunks of <= 300
  EXPECT_EQ(info->generation(), 5);

  // A pull of step 1 started before anyone pushed waits for it.
  std::vector<float> pulled(kN, -1.f);
  absl::Status pull;
  std::thread puller([&] { pull = f.client->Pull(5, 1, 0, kN, pulled.data()); });

  std::vector<std::vector<float>> grads = {std::vector<float>(kN, 1.f),
                                           std::vector<float>(kN, 3.f)};
  std::vector<std::thread> workers;
  std::vector<absl::Status> results(2);
  for (int rank = 0; rank < 2; ++rank) {
    workers.emplace_back([&, rank] {
      std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
      results[rank] = s->Open(Header(rank));
      for (const shard::Chunk& c : f.layout.chunks()) {
        if (results[rank].ok()) results[rank] = s->Write(c, grads[rank].data() + c.lo);
      }
      if (results[rank].ok()) {
        // rank 0 retries its first chunk: acknowledged, not summed.
        if (rank == 0) results[rank] = s->Write(f.layout.chunk(0), grads[0].data());
        absl::StatusOr<v1::PushGradientsResponse> r = s->Finish();
        results[rank] = r.status();
        if (r.ok()) {
          EXPECT_EQ(r->duplicates(), rank == 0 ? 1 : 0);
          EXPECT_EQ(r->bytes_received(), (kN + (rank == 0 ? f.layout.chunk(0).size() : 0)) * 4);
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  puller.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(pull.ok()) << pull;
  for (float p : pulled) ASSERT_FLOAT_EQ(p, 2.f - 0.5f * 2.f);

  const std::string scrape = f.server->metrics()->Scrape();
  EXPECT_NE(scrape.find("tandem_shard_steps_applied_total{service=\"shardserver\"} 1"),
            std::string::npos)
      << scrape;
  EXPECT_NE(scrape.find("tandem_shard_push_bytes_total"), std::string::npos);
}

TEST(ShardService, CallsWithoutTheJobTokenAreUnauthenticated) {
  ShardServerOptions o;
  o.auth_token = "job-secret";
  std::unique_ptr<ShardServer> server = ShardServer::Start(o).value();
  std::vector<float> params(kN, 1.f);
  auto stranger = shard::ShardClient::Create({server->address(), "job", absl::Seconds(20)}).value();
  absl::Status refused = stranger->Init(Init(1), params.data()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  // A member of the job (the token installed as this process's default,
  // as main() does) is let in.
  SetDefaultAuthToken("job-secret");
  auto member = shard::ShardClient::Create({server->address(), "job", absl::Seconds(20)}).value();
  absl::Status ok = member->Init(Init(1), params.data()).status();
  SetDefaultAuthToken("");
  EXPECT_TRUE(ok.ok()) << ok;
}

TEST(ShardService, RefusalsArriveAsTheirCodes) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  // Before InitShard nothing is accepted.
  std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
  ASSERT_TRUE(s->Open(Header(0)).ok());
  absl::Status w = s->Write(f.layout.chunk(0), params.data());
  absl::StatusOr<v1::PushGradientsResponse> r =
      w.ok() ? s->Finish() : absl::StatusOr<v1::PushGradientsResponse>(w);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_NE(r.status().message().find("InitShard"), std::string::npos) << r.status();

  ASSERT_TRUE(f.client->Init(Init(2), params.data()).ok());
  // A chunk that is not one of the server's.
  ASSERT_TRUE(s->Open(Header(0)).ok());
  shard::Chunk wrong{10, 310, 0};
  w = s->Write(wrong, params.data());
  r = w.ok() ? s->Finish() : absl::StatusOr<v1::PushGradientsResponse>(w);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  // A pull of a step that will not come ends at its deadline.
  auto quick = shard::ShardClient::Create({f.server->address(), "job", absl::Milliseconds(200)});
  ASSERT_TRUE(quick.ok());
  absl::Status p = (*quick)->Pull(5, 1, 0, kN, params.data());
  EXPECT_EQ(p.code(), absl::StatusCode::kDeadlineExceeded) << p;
  // Another job's request is refused.
  auto other = shard::ShardClient::Create({f.server->address(), "other", absl::Seconds(5)});
  ASSERT_TRUE(other.ok());
  p = (*other)->Pull(5, 0, 0, kN, params.data());
  EXPECT_EQ(p.code(), absl::StatusCode::kInvalidArgument) << p;
  // Step 0 (the initial parameters) is pullable.
  std::vector<float> out(kN, 0.f);
  ASSERT_TRUE(f.client->Pull(5, 0, 0, kN, out.data()).ok());
  EXPECT_EQ(out, params);
}

// hybrid's compress=int8: an int8 block is dequantized and summed in fp32;
// a push with an int8 chunk the codec does not take is refused, nothing
// applied (the step is then completed by the good push).
TEST(ShardService, Int8PushesAreDequantizedAndSummedInFp32) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  ASSERT_TRUE(f.client->Init(Init(1), params.data()).ok());
  constexpr int kChunk = 256;
  std::unique_ptr<codec::Codec> codec = codec::MakeInt8Codec({.chunk = kChunk});
  std::vector<float> grads(kN);
  for (int64_t i = 0; i < kN; ++i) grads[i] = 0.001f * static_cast<float>(i % 97) - 0.03f;
  shard::PushHeader h = Header(0);
  h.int8_chunk = kChunk;

  std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<float> decoded(kN);
  for (const shard::Chunk& c : f.layout.chunks()) {
    blocks.emplace_back(codec->MaxEncodedBytes(c.size()));
    ASSERT_EQ(static_cast<int64_t>(blocks.back().size()), shard::Int8BlockBytes(c.size(), kChunk));
    codec->Encode(grads.data() + c.lo, c.size(), {}, blocks.back().data());
    codec->Decode(blocks.back().data(), c.size(), decoded.data() + c.lo);
  }
  shard::PushHeader bad = h;
  bad.int8_chunk = 100;  // outside the codec's range
  ASSERT_TRUE(s->Open(bad).ok());
  absl::Status w = s->Write(f.layout.chunk(0), blocks[0].data());
  absl::StatusOr<v1::PushGradientsResponse> refused =
      w.ok() ? s->Finish() : absl::StatusOr<v1::PushGradientsResponse>(w);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("int8_chunk 100"), std::string::npos)
      << refused.status();

  ASSERT_TRUE(s->Open(h).ok());
  for (int c = 0; c < f.layout.num_chunks(); ++c) {
    ASSERT_TRUE(s->Write(f.layout.chunk(c), blocks[c].data()).ok());
  }
  absl::StatusOr<v1::PushGradientsResponse> ok = s->Finish();
  ASSERT_TRUE(ok.ok()) << ok.status();
  int64_t block_bytes = 0;
  for (const auto& b : blocks) block_bytes += b.size();
  EXPECT_EQ(ok->bytes_received(), block_bytes);
  EXPECT_LT(block_bytes, kN * 4 / 3);
  std::vector<float> pulled(kN);
  ASSERT_TRUE(f.client->Pull(5, 1, 0, kN, pulled.data()).ok());
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(pulled[i], 2.f - 0.5f * decoded[i]) << i;  // SGD, lr 0.5, world 1
  }
}

// hybrid's int8 pulls: each chunk's delta block, added by the worker to
// what it holds, keeps it within one rounding of the fp32 master; a reset
// pull gives the master and drops that step's delta; a generation without
// int8 pulls refuses them.
TEST(ShardService, Int8DeltaPullsOverGrpc) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  shard::ShardInit init = Init(1);
  const shard::Chunk first = f.layout.chunk(0);
  std::vector<uint8_t> block(shard::Int8BlockBytes(first.size(), 256));
  ASSERT_TRUE(f.client->Init(init, params.data()).ok());
  // Pushed fp32, no int8 pulls in this generation: refused.
  {
    std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
    ASSERT_TRUE(s->Open(Header(0)).ok());
    std::vector<float> g(kN, 1.f);
    for (const shard::Chunk& c : f.layout.chunks()) ASSERT_TRUE(s->Write(c, g.data() + c.lo).ok());
    ASSERT_TRUE(s->Finish().ok());
  }
  absl::Status refused =
      f.client->PullDelta(5, 1, first.lo, first.hi, block.data(), block.size());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("without int8 delta pulls"), std::string::npos) << refused;

  init.generation = 6;
  init.pull_int8_chunk = 256;
  ASSERT_TRUE(f.client->Init(init, params.data()).ok());
  std::unique_ptr<codec::Codec> codec = codec::MakeInt8Codec({.chunk = 256});
  std::vector<float> held = params, master(kN);
  for (int64_t step = 1; step <= 3; ++step) {
    shard::PushHeader h = Header(0);
    h.generation = 6;
    h.step = step;
    std::vector<float> g(kN);
    for (int64_t i = 0; i < kN; ++i) g[i] = 0.01f * static_cast<float>((i * step) % 89) - 0.4f;
    std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
    ASSERT_TRUE(s->Open(h).ok());
    for (const shard::Chunk& c : f.layout.chunks()) ASSERT_TRUE(s->Write(c, g.data() + c.lo).ok());
    ASSERT_TRUE(s->Finish().ok());
    float largest_scale = 0;
    for (const shard::Chunk& c : f.layout.chunks()) {
      std::vector<uint8_t> b(shard::Int8BlockBytes(c.size(), 256));
      absl::Status p = f.client->PullDelta(6, step, c.lo, c.hi, b.data(), b.size());
      ASSERT_TRUE(p.ok()) << p;
      for (int64_t k = 0; k < (c.size() + 255) / 256; ++k) {
        float scale;
        std::memcpy(&scale, b.data() + 4 * k, 4);
        largest_scale = std::max(largest_scale, scale);
      }
      codec->DecodeAdd(b.data(), c.size(), held.data() + c.lo);
    }
    ASSERT_TRUE(f.client->Pull(6, step, 0, kN, master.data()).ok());
    double error = 0;
    for (int64_t i = 0; i < kN; ++i) error = std::max(error, double{std::fabs(held[i] - master[i])});
    EXPECT_LE(error, largest_scale / 2 * 1.001) << "step " << step;
    EXPECT_GT(error, 0) << "step " << step;
  }
  // The block size must match the chunk's, or the pull is refused.
  EXPECT_EQ(
      f.client->PullDelta(6, 3, first.lo, first.hi, block.data(), block.size() - 1).code(),
      absl::StatusCode::kDataLoss);
  // Reset: the fp32 master, and step 3's delta is gone.
  ASSERT_TRUE(f.client->Pull(6, 3, 0, kN, master.data(), "", /*reset_delta_reference=*/true).ok());
  EXPECT_EQ(f.client->PullDelta(6, 3, first.lo, first.hi, block.data(), block.size()).code(),
            absl::StatusCode::kFailedPrecondition);
}

// SaveShard: the server writes its range (master weights and optimizer
// state of the step) as a checkpoint shard that ReadCheckpoint reads back;
// a step the server is not at is refused and nothing is written.
TEST(ShardService, SaveShardWritesTheRangeAsACheckpointShard) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  shard::ShardInit init = Init(1);
  init.range = {0, kN};
  init.optimizer.set_momentum(0.9);
  ASSERT_TRUE(f.client->Init(init, params.data()).ok());
  std::vector<float> grads(kN);
  for (int64_t i = 0; i < kN; ++i) grads[i] = 0.01f * static_cast<float>(i % 13);
  std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
  ASSERT_TRUE(s->Open(Header(0)).ok());
  for (const shard::Chunk& c : f.layout.chunks()) {
    ASSERT_TRUE(s->Write(c, grads.data() + c.lo).ok());
  }
  ASSERT_TRUE(s->Finish().ok());
  std::vector<float> pulled(kN);
  ASSERT_TRUE(f.client->Pull(5, 1, 0, kN, pulled.data()).ok());

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/save-shard.tckpt";
  v1::SaveShardRequest r;
  r.set_generation(5);
  r.set_step(2);  // not applied
  r.set_path(path);
  r.set_model_fingerprint(77);
  r.set_total_params(2 * kN);
  absl::StatusOr<v1::SaveShardResponse> refused = f.client->Save(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(checkpoint::ReadCheckpoint(path, {}).status().code() == absl::StatusCode::kNotFound);

  r.set_step(1);
  v1::SaveShardBlob* blob = r.add_blobs();
  blob->set_name("data_cursor");
  blob->set_data("cursor-bytes");
  absl::StatusOr<v1::SaveShardResponse> saved = f.client->Save(r);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->range().end(), kN);
  absl::StatusOr<checkpoint::Checkpoint> c = checkpoint::ReadCheckpoint(path, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 1);
  EXPECT_EQ(c->model_fingerprint, 77u);
  EXPECT_EQ(c->total_params, 2 * kN);
  EXPECT_EQ(c->range_lo, 0);
  EXPECT_EQ(c->range_hi, kN);
  EXPECT_EQ(c->params, pulled);
  EXPECT_EQ(c->optimizer_name, "sgd");
  const std::vector<float>* momentum = c->FindOptimizerState("momentum_buffer");
  ASSERT_NE(momentum, nullptr);
  // SGD with momentum, first step: the buffer is the gradient (world 1).
  for (int64_t i = 0; i < kN; ++i) ASSERT_FLOAT_EQ((*momentum)[i], grads[i]) << i;
  const std::string* cursor = c->FindBlob("data_cursor");
  ASSERT_NE(cursor, nullptr);
  EXPECT_EQ(*cursor, "cursor-bytes");

  // A server that was never initialised has nothing to save.
  Fixture empty = Start();
  EXPECT_EQ(empty.client->Save(r).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A background checkpoint (issue 34 item 4): SAVE_SNAPSHOT copies step 1
// at the step boundary; step 2 is then trained; SAVE_FROM_SNAPSHOT writes
// step 1's copy, byte for byte the file a synchronous save of step 1
// wrote. Writing a snapshot of another step is refused.
TEST(ShardService, ASnapshotSavedLaterIsTheSynchronousFileByteForByte) {
  Fixture f = Start();
  std::vector<float> params(kN, 2.f);
  shard::ShardInit init = Init(1);
  init.optimizer.set_momentum(0.9);
  ASSERT_TRUE(f.client->Init(init, params.data()).ok());
  auto step = [&](int64_t n) {
    std::vector<float> grads(kN);
    for (int64_t i = 0; i < kN; ++i) grads[i] = 0.01f * static_cast<float>((i + n) % 13);
    std::unique_ptr<shard::PushStream> s = f.client->NewPushStream();
    shard::PushHeader h = Header(0);
    h.step = n;
    ASSERT_TRUE(s->Open(h).ok());
    for (const shard::Chunk& c : f.layout.chunks()) {
      ASSERT_TRUE(s->Write(c, grads.data() + c.lo).ok());
    }
    ASSERT_TRUE(s->Finish().ok());
    ASSERT_TRUE(f.client->Pull(5, n, 0, kN, params.data()).ok());
  };
  step(1);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp");
  v1::SaveShardRequest r;
  r.set_generation(5);
  r.set_step(1);
  r.set_model_fingerprint(77);
  r.set_total_params(kN);
  r.add_blobs()->set_name("data_cursor");
  r.set_path(dir + "/sync.tckpt");
  ASSERT_TRUE(f.client->Save(r).ok());

  v1::SaveShardRequest snap = r;
  snap.set_mode(v1::SAVE_SNAPSHOT);
  snap.clear_path();
  absl::StatusOr<v1::SaveShardResponse> taken = f.client->Save(snap);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->bytes(), 2 * kN * 4);  // parameters + momentum
  step(2);  // training goes on

  v1::SaveShardRequest later = r;
  later.set_mode(v1::SAVE_FROM_SNAPSHOT);
  later.set_path(dir + "/background.tckpt");
  ASSERT_TRUE(f.client->Save(later).ok());
  const std::string sync_bytes = ReadFileBytes(dir + "/sync.tckpt");
  ASSERT_FALSE(sync_bytes.empty());
  EXPECT_TRUE(sync_bytes == ReadFileBytes(dir + "/background.tckpt"));

  later.set_step(2);
  absl::StatusOr<v1::SaveShardResponse> other = f.client->Save(later);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("holds step 1"), std::string::npos) << other.status();
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem

namespace tandem {
namespace shardserver {
namespace {

// A pull waiting for a step nobody completes ends CANCELLED as soon as
// another thread cancels it (RemoteShards does this when a step is
// abandoned), long before its 20 s timeout; later pulls through the same
// canceller fail at once.
TEST(ShardService, APullWaitingForItsStepIsCancelled) {
  Fixture f = Start();
  std::vector<float> params(kN, 1.f);
  ASSERT_TRUE(f.client->Init(Init(2), params.data()).ok());
  shard::CallCanceller cancel;
  absl::Status pulled;
  absl::Notification done;
  std::thread puller([&] {
    pulled = f.client->Pull(5, 1, 0, 300, params.data(), "", false, &cancel);
    done.Notify();
  });
  // Nobody pushes step 1: the pull can only end by the cancel (or time out).
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  const absl::Time start = absl::Now();
  cancel.Cancel();
  puller.join();
  EXPECT_EQ(pulled.code(), absl::StatusCode::kCancelled) << pulled;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(f.client->Pull(5, 1, 0, 300, params.data(), "", false, &cancel).code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
