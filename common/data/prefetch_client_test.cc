#include "common/data/prefetch_client.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/server.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

constexpr int64_t kStepsPerEpoch = 5;

// A scripted DataServer: batch (e, s) carries one sample id e*100+s and 16
// feature bytes. Each call may fail with UNAVAILABLE after `fail_after`
// batches (taken from a per-call script); "missing" is NOT_FOUND.
class FakeDataServer final : public v1::DataServer::Service {
 public:
  explicit FakeDataServer(std::vector<int> fail_after = {})
      : fail_after_(std::move(fail_after)) {}

  grpc::Status StreamBatches(grpc::ServerContext* ctx,
                             const v1::StreamBatchesRequest* r,
                             grpc::ServerWriter<v1::Batch>* w) override {
    const grpc::Status status = Serve(ctx, r, w);
    absl::MutexLock lock(&mu_);
    ended_.push_back(status.error_code());
    return status;
  }

  std::vector<Cursor> starts() {
    absl::MutexLock lock(&mu_);
    return starts_;
  }
  std::vector<bool> normalize_asked() {
    absl::MutexLock lock(&mu_);
    return normalize_asked_;
  }

  // Waits (up to `timeout`) until `n` calls have returned; their codes.
  std::vector<grpc::StatusCode> WaitForEnded(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return ended_;
  }

 private:
  grpc::Status Serve(grpc::ServerContext* ctx, const v1::StreamBatchesRequest* r,
                     grpc::ServerWriter<v1::Batch>* w) {
    int fail_after = -1;
    {
      absl::MutexLock lock(&mu_);
      starts_.push_back({r->epoch(), r->step_in_epoch(), r->start_position()});
      normalize_asked_.push_back(r->normalize_to_f32());
      if (calls_ < fail_after_.size()) fail_after = fail_after_[calls_];
      ++calls_;
    }
    if (r->dataset() == "missing") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown dataset 'missing'");
    }
    if (fail_after == 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
    Cursor c{r->epoch(), r->step_in_epoch(), r->start_position()};
    for (int64_t sent = 0; r->max_batches() == 0 || sent < r->max_batches(); ++sent) {
      if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
      if (fail_after > 0 && sent == fail_after) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected failure");
      }
      v1::Batch b;
      b.set_epoch(c.epoch);
      b.set_step_in_epoch(c.step_in_epoch);
      b.set_last_in_epoch(c.step_in_epoch == kStepsPerEpoch - 1);
      b.set_start_position(c.offset);
      b.add_sample_ids(c.epoch * 100 + c.step_in_epoch);
      b.mutable_features()->set_dtype(r->dataset() == "f32" ? v1::DTYPE_F32 : v1::DTYPE_U8);
      b.mutable_features()->add_shape(1);
      b.mutable_features()->add_shape(16);
      b.mutable_features()->set_data(std::string(16, static_cast<char>(c.step_in_epoch)));
      b.mutable_labels()->set_dtype(v1::DTYPE_I32);
      b.mutable_labels()->add_shape(1);
      b.mutable_labels()->set_data(std::string(4, 0));
      if (!w->Write(b)) return grpc::Status::CANCELLED;
      c = b.last_in_epoch() ? Cursor{c.epoch + 1, 0, 0}
                            : Cursor{c.epoch, c.step_in_epoch + 1, c.offset};
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  std::vector<int> fail_after_;
  size_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Cursor> starts_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> normalize_asked_ ABSL_GUARDED_BY(mu_);  // per call
  std::vector<grpc::StatusCode> ended_ ABSL_GUARDED_BY(mu_);  // per returned call
};

PrefetchOptions Options(const std::vector<std::string>& servers, int64_t max) {
  PrefetchOptions o;
  o.servers = servers;
  o.request.set_dataset("d");
  o.request.set_global_batch_size(4);
  o.request.set_world_size(1);
  o.request.set_max_batches(max);
  o.request.set_epoch(1);
  o.request.set_step_in_epoch(3);
  o.prefetch_depth = 2;
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(5);
  return o;
}

// Reads until an error; returns the sample ids and the final status.
absl::Status Drain(PrefetchClient* c, std::vector<int64_t>* ids) {
  for (;;) {
    auto b = c->Next();
    if (!b.ok()) return b.status();
    EXPECT_EQ((*b)->features.size(), 16u);
    EXPECT_EQ((*b)->feature_shape, (std::vector<int64_t>{1, 16}));
    EXPECT_EQ((*b)->feature_dtype, v1::DTYPE_U8);
    EXPECT_EQ((*b)->label_dtype, v1::DTYPE_I32);
    EXPECT_EQ((*b)->label_shape, (std::vector<int64_t>{1}));
    EXPECT_EQ((*b)->labels.size(), 4u);
    EXPECT_EQ((*b)->features[0], static_cast<char>((*b)->step_in_epoch));
    ids->push_back((*b)->sample_ids[0]);
  }
}

std::vector<int64_t> Expected(Cursor c, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(c.epoch * 100 + c.step_in_epoch);
    c = c.step_in_epoch == kStepsPerEpoch - 1 ? Cursor{c.epoch + 1, 0}
                                              : Cursor{c.epoch, c.step_in_epoch + 1};
  }
  return out;
}

TEST(PrefetchClientTest, DeliversInOrderThenOutOfRange) {
  FakeDataServer fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  auto client = PrefetchClient::Start(Options({(*server)->address()}, 12));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->cursor(), (Cursor{1, 3}));
  std::vector<int64_t> ids;
  absl::Status end = Drain(client->get(), &ids);
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_EQ(ids, Expected({1, 3}, 12));
  EXPECT_EQ((*client)->cursor(), (Cursor{4, 0}));  // 2 + 5 + 5 batches
  EXPECT_EQ((*client)->reconnects(), 0);
  EXPECT_TRUE(absl::IsOutOfRange((*client)->Next().status()));  // sticky
}

TEST(PrefetchClientTest, ReconnectsAndResumesAtExactCursor) {
  // Call 1 breaks after 4 batches, call 2 refuses, call 3 breaks after 1.
  FakeDataServer fake({4, 0, 1});
  auto metrics = Metrics::Create({});
  ASSERT_TRUE(metrics.ok());
  auto cm = ClientMetrics::Create(metrics->get());
  ASSERT_TRUE(cm.ok());
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  auto options = Options({(*server)->address()}, 20);
  options.metrics = &*cm;
  auto client = PrefetchClient::Start(options);
  ASSERT_TRUE(client.ok());
  std::vector<int64_t> ids;
  EXPECT_TRUE(absl::IsOutOfRange(Drain(client->get(), &ids)));
  EXPECT_EQ(ids, Expected({1, 3}, 20));  // nothing lost, nothing repeated
  EXPECT_EQ((*client)->reconnects(), 3);
  const std::vector<Cursor> starts = fake.starts();
  ASSERT_EQ(starts.size(), 4u);
  EXPECT_EQ(starts[0], (Cursor{1, 3}));
  EXPECT_EQ(starts[1], (Cursor{2, 2}));  // after 4 batches: (1,3)(1,4)(2,0)(2,1)
  EXPECT_EQ(starts[2], (Cursor{2, 2}));
  EXPECT_EQ(starts[3], (Cursor{2, 3}));
  EXPECT_EQ(cm->reconnects->Value(), 3);
  EXPECT_EQ(cm->batches->Value(), 20);
  EXPECT_EQ(cm->bytes->Value(), 20 * (16 + 4));  // features + labels of each batch
  // The metric and the accessor account the same waits.
  EXPECT_NEAR(cm->wait_seconds->Value(), absl::ToDoubleSeconds((*client)->wait_time()), 1e-6);
}

TEST(PrefetchClientTest, AReconnectKeepsTheEpochsStartPosition) {
  // An epoch entered at sample 7 (a new world or batch size): a stream that
  // breaks inside it resumes with the same start_position; past the epoch
  // the offset is 0 again.
  FakeDataServer fake({1, 3});
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  auto options = Options({(*server)->address()}, 8);
  options.request.set_start_position(7);
  auto client = PrefetchClient::Start(options);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->cursor(), (Cursor{1, 3, 7}));
  auto first = (*client)->Next();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->start_position, 7);
  EXPECT_EQ((*client)->cursor(), (Cursor{1, 4, 7}));
  std::vector<int64_t> ids;
  EXPECT_TRUE(absl::IsOutOfRange(Drain(client->get(), &ids)));
  const std::vector<Cursor> starts = fake.starts();
  ASSERT_GE(starts.size(), 3u);
  EXPECT_EQ(starts[0], (Cursor{1, 3, 7}));
  EXPECT_EQ(starts[1], (Cursor{1, 4, 7}));  // broke after one batch
  EXPECT_EQ(starts[2], (Cursor{2, 2, 0}));  // after (1,4) (2,0) (2,1)
}

TEST(PrefetchClientTest, FailsOverToTheNextServer) {
  FakeDataServer down({0, 0, 0, 0, 0, 0, 0, 0});
  FakeDataServer up;
  auto s1 = RpcServer::Start({}, {&down});
  auto s2 = RpcServer::Start({}, {&up});
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto client = PrefetchClient::Start(
      Options({(*s1)->address(), (*s2)->address()}, 6));  // rank 0 -> s1 first
  ASSERT_TRUE(client.ok());
  std::vector<int64_t> ids;
  EXPECT_TRUE(absl::IsOutOfRange(Drain(client->get(), &ids)));
  EXPECT_EQ(ids, Expected({1, 3}, 6));
  EXPECT_EQ(down.starts().size(), 1u);
  EXPECT_EQ(up.starts().size(), 1u);
}

TEST(PrefetchClientTest, RequestErrorsAreNotRetried) {
  FakeDataServer fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  auto options = Options({(*server)->address()}, 0);
  options.request.set_dataset("missing");
  auto client = PrefetchClient::Start(options);
  ASSERT_TRUE(client.ok());
  auto b = (*client)->Next();
  EXPECT_TRUE(absl::IsNotFound(b.status())) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "missing"));
  EXPECT_EQ(fake.starts().size(), 1u);
}

TEST(PrefetchClientTest, GivesUpWhenNoServerAnswers) {
  FakeDataServer fake;
  std::string address;
  {
    auto server = RpcServer::Start({}, {&fake});
    ASSERT_TRUE(server.ok());
    address = (*server)->address();
  }  // shut down: nothing listens there now
  auto options = Options({address}, 0);
  options.max_attempts = 3;
  auto client = PrefetchClient::Start(options);
  ASSERT_TRUE(client.ok());
  auto b = (*client)->Next();
  EXPECT_TRUE(absl::IsUnavailable(b.status())) << b.status();
  EXPECT_EQ((*client)->reconnects(), 2);
}

TEST(PrefetchClientTest, StopsCleanlyWhileStreamingForever) {
  FakeDataServer fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  auto client = PrefetchClient::Start(Options({(*server)->address()}, 0));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Next().ok());
  client->reset();  // must cancel the endless stream and join
  // The server saw its one endless call end as cancelled by the client.
  EXPECT_EQ(fake.WaitForEnded(1, absl::Seconds(30)),
            std::vector<grpc::StatusCode>{grpc::StatusCode::CANCELLED});
  EXPECT_EQ(fake.starts().size(), 1u);
}

TEST(PrefetchClientTest, NormalizesU8FeaturesHereWithTheServersFormula) {
  FakeDataServer fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  PrefetchOptions o = Options({(*server)->address()}, 3);
  o.request.set_normalize_to_f32(true);
  o.normalize_here = true;
  auto client = PrefetchClient::Start(o);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int k = 0; k < 3; ++k) {
    auto b = (*client)->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->feature_dtype, v1::DTYPE_F32);
    EXPECT_EQ((*b)->feature_shape, (std::vector<int64_t>{1, 16}));
    ASSERT_EQ((*b)->features.size(), 16u * sizeof(float));
    const float* f = reinterpret_cast<const float*>((*b)->features.data());
    // The u8 value is the step; the server would send step * (1 / 255).
    const float want = static_cast<float>((*b)->step_in_epoch) * (1.0f / 255.0f);
    for (int e = 0; e < 16; ++e) EXPECT_EQ(f[e], want) << "element " << e;
  }
  EXPECT_EQ((*client)->Next().status().code(), absl::StatusCode::kOutOfRange);
  // The server was asked for the u8 bytes as they are.
  for (bool asked : fake.normalize_asked()) EXPECT_FALSE(asked);
}

TEST(PrefetchClientTest, NormalizingHereRefusesFeaturesThatAreNotU8) {
  FakeDataServer fake;
  auto server = RpcServer::Start({}, {&fake});
  ASSERT_TRUE(server.ok());
  PrefetchOptions o = Options({(*server)->address()}, 3);
  o.request.set_dataset("f32");
  o.request.set_normalize_to_f32(true);
  o.normalize_here = true;
  auto client = PrefetchClient::Start(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto b = (*client)->Next();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  EXPECT_NE(b.status().message().find("needs u8 features"), std::string::npos) << b.status();
}

TEST(PrefetchClientTest, InvalidOptions) {
  EXPECT_TRUE(absl::IsInvalidArgument(PrefetchClient::Start(Options({}, 0)).status()));
  auto o = Options({"127.0.0.1:1"}, 0);
  o.request.set_rank(1);
  EXPECT_TRUE(absl::IsInvalidArgument(PrefetchClient::Start(o).status()));
  o = Options({"127.0.0.1:1"}, 0);
  o.request.set_global_batch_size(0);
  EXPECT_TRUE(absl::IsInvalidArgument(PrefetchClient::Start(o).status()));
  o = Options({"127.0.0.1:1"}, 0);
  o.prefetch_depth = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(PrefetchClient::Start(o).status()));
}

}  // namespace
}  // namespace data
}  // namespace tandem
