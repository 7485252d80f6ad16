// CoordinatorStore against a real in-process CoordinatorServer (port 0): a
// 2-rank Gloo mesh bootstraps through it and allreduces; waits time out with
// Gloo's exception; a stale generation is refused.
#include "common/comm/coordinator_store.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/rpc/channel.h"
#include "gloo/common/error.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "services/coordinator/coordinator_server.h"

namespace tandem {
namespace {

class CoordinatorStoreTest : public ::testing::Test {
 protected:
  void StartCoordinator(int workers) {
    CoordinatorServerOptions o;
    o.coordinator.job_id = "store-test";
    o.coordinator.min_workers = workers;
    o.coordinator.max_workers = workers;
    o.coordinator.settle_time = absl::ZeroDuration();
    o.run_liveness_thread = false;
    auto server = CoordinatorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = MakeChannel({.target = absl::StrCat("127.0.0.1:", server_->port())});
  }

  // Joins `workers` workers concurrently; returns their responses by index.
  std::vector<v1::JoinResponse> JoinAll(int workers) {
    std::vector<v1::JoinResponse> responses(workers);
    std::vector<std::thread> threads;
    for (int i = 0; i < workers; ++i) {
      threads.emplace_back([&, i] {
        auto stub = v1::Coordinator::NewStub(channel_);
        v1::JoinRequest req;
        req.mutable_job()->set_job_id("store-test");
        req.set_worker_id(absl::StrCat("w", i));
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        grpc::Status s = stub->Join(&ctx, req, &responses[i]);
        EXPECT_TRUE(s.ok()) << s.error_message();
      });
    }
    for (auto& t : threads) t.join();
    return responses;
  }

  std::unique_ptr<CoordinatorStore> MakeStore(int64_t generation,
                                              absl::Duration wait = absl::Seconds(30)) {
    CoordinatorStoreOptions o;
    o.channel = channel_;
    o.job_id = "store-test";
    o.generation = generation;
    o.default_wait = wait;
    auto store = CoordinatorStore::Create(o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CoordinatorStoreTest, TwoRankGlooAllreduceBootstrapsThroughTheCoordinator) {
  StartCoordinator(2);
  std::vector<v1::JoinResponse> joins = JoinAll(2);
  ASSERT_EQ(joins[0].generation(), joins[1].generation());
  std::vector<std::vector<float>> data(2);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      const v1::JoinResponse& j = joins[i];
      std::unique_ptr<CoordinatorStore> store = MakeStore(j.generation());
      ASSERT_NE(store, nullptr);
      GlooOptions g;
      g.rank = j.rank();
      g.world_size = j.world_size();
      g.store = store.get();
      g.prefix = absl::StrCat("gen", j.generation());
      g.timeout = absl::Seconds(30);
      auto comm = GlooCommunicator::Create(g);
      if (!comm.ok()) {
        results[i] = comm.status();
        return;
      }
      data[i].assign(1000, static_cast<float>(j.rank() + 1));
      data[i][7] = 10.f * (j.rank() + 1);
      results[i] = (*comm)->AllReduce(data[i].data(), 1000, ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i];
    EXPECT_EQ(data[i][0], 3.f);
    EXPECT_EQ(data[i][999], 3.f);
    EXPECT_EQ(data[i][7], 30.f);
  }
}

TEST_F(CoordinatorStoreTest, SetThenGetRoundTripsBytes) {
  StartCoordinator(1);
  std::vector<v1::JoinResponse> joins = JoinAll(1);
  std::unique_ptr<CoordinatorStore> store = MakeStore(joins[0].generation());
  ASSERT_NE(store, nullptr);
  const std::vector<char> value = {'a', '\0', '\xff', 'z'};
  store->set("k", value);
  store->wait({"k"}, std::chrono::milliseconds(100));
  EXPECT_EQ(store->get("k"), value);
}

TEST_F(CoordinatorStoreTest, WaitHonoursTheTimeoutAndThrowsGlooIoException) {
  StartCoordinator(1);
  std::vector<v1::JoinResponse> joins = JoinAll(1);
  std::unique_ptr<CoordinatorStore> store = MakeStore(joins[0].generation());
  ASSERT_NE(store, nullptr);
  const absl::Time start = absl::Now();
  try {
    store->wait({"never-set"}, std::chrono::milliseconds(200));
    FAIL() << "wait for a missing key returned";
  } catch (const gloo::IoException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Timed out"), std::string::npos) << what;
    EXPECT_NE(what.find("never-set"), std::string::npos) << what;
  }
  // Bounded: far less than the 30 s default wait.
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST_F(CoordinatorStoreTest, StaleGenerationIsRefusedWithAnException) {
  StartCoordinator(1);
  std::vector<v1::JoinResponse> joins = JoinAll(1);
  std::unique_ptr<CoordinatorStore> stale = MakeStore(joins[0].generation() + 5);
  ASSERT_NE(stale, nullptr);
  try {
    stale->set("k", {'x'});
    FAIL() << "set for an unknown generation succeeded";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("generation"), std::string::npos) << e.what();
  }
}

TEST_F(CoordinatorStoreTest, GlooConnectTimeoutBecomesDeadlineExceeded) {
  // Two ranks expected, one present: the connect fails with a Status (the
  // exception is caught at GlooCommunicator's boundary), not a hang.
  StartCoordinator(1);
  std::vector<v1::JoinResponse> joins = JoinAll(1);
  std::unique_ptr<CoordinatorStore> store =
      MakeStore(joins[0].generation(), absl::Milliseconds(300));
  ASSERT_NE(store, nullptr);
  GlooOptions g;
  g.rank = 0;
  g.world_size = 2;
  g.store = store.get();
  g.timeout = absl::Milliseconds(300);
  auto comm = GlooCommunicator::Create(g);
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status()) || absl::IsUnavailable(comm.status()))
      << comm.status();
}

TEST(CoordinatorStoreOptionsTest, BadOptionsAreRefused) {
  CoordinatorStoreOptions o;
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorStore::Create(o).status()));
  o.channel = MakeChannel({.target = "127.0.0.1:1"});
  o.generation = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorStore::Create(o).status()));
}

}  // namespace
}  // namespace tandem
