// Range replication (issue 34 item 3) on two in-process shard servers over
// gRPC, driven by the workers' real client (RemoteShards): each server's
// range is replicated on the other bit for bit, at most one step behind;
// after a server is lost with the next step applied on the survivor, the
// state of the last step every worker completed (or of the step before,
// when its replication was still in flight) is rebuilt from the
// survivor's own kept copies and the replica it holds; a replica that
// cannot be reached does not block the workers; the replica keeps only
// the two newest steps.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/shard/optimizer_config.h"
#include "common/shard/remote_shards.h"
#include "common/shard/shard_client.h"
#include "gtest/gtest.h"
#include "services/shardserver/replica_store.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kN = 1003;   // uneven over 2 servers and 100-element chunks
constexpr int64_t kChunk = 100;

v1::OptimizerConfig AdamW() {
  v1::OptimizerConfig c;
  c.set_name("adamw");
  c.set_learning_rate(0.01);
  c.set_beta1(0.9);
  c.set_beta2(0.999);
  c.set_epsilon(1e-8);
  c.set_weight_decay(0.01);
  return c;
}

std::vector<std::string> StateNames() {
  auto o = shard::BuildOptimizer(AdamW(), optim::ParamRange{0, 1}).value();
  std::vector<std::string> names;
  for (const optim::StateBuffer& b : o->state()) names.push_back(b.name);
  return names;
}

std::vector<float> Gradient(int64_t step) {
  std::vector<float> g(kN);
  for (int64_t i = 0; i < kN; ++i) g[i] = static_cast<float>((i * 7 + step * 13) % 17) - 8.f;
  return g;
}

struct Cluster {
  std::vector<std::unique_ptr<ShardServer>> servers;
  std::vector<std::string> addresses;
};

Cluster StartServers(int n) {
  Cluster c;
  for (int i = 0; i < n; ++i) {
    c.servers.push_back(ShardServer::Start({}).value());
    c.addresses.push_back(c.servers.back()->address());
  }
  return c;
}

std::unique_ptr<shard::RemoteShards> Connect(const std::vector<std::string>& addresses,
                                             int64_t generation, bool replicate = true) {
  shard::RemoteShardsOptions o;
  o.addresses = addresses;
  o.job_id = "job";
  o.generation = generation;
  o.size = kN;
  o.chunk_elements = kChunk;
  o.timeout = absl::Seconds(20);
  o.replicate = replicate;
  return shard::RemoteShards::Create(o).value();
}

// One step of a one-rank job: every chunk pushed, every chunk pulled.
void Step(shard::RemoteShards& r, int64_t step, std::vector<float>& params) {
  shard::PushHeader h;
  h.generation = 1;
  h.step = step;
  h.learning_rate = 0.01;
  const std::vector<float> g = Gradient(step);
  ASSERT_TRUE(r.BeginPushes(h).ok());
  for (int c = 0; c < r.layout().num_chunks(); ++c) r.Push(c, g.data() + r.layout().chunk(c).lo);
  r.ClosePushes();
  ASSERT_TRUE(r.WaitPushes().ok());
  for (int c = 0; c < r.layout().num_chunks(); ++c) r.Pull(c, step, params.data());
  absl::Status s = r.WaitAllPulls();
  ASSERT_TRUE(s.ok()) << s;
}

// Parameters and every state buffer of the whole vector at `step`, through
// the ordinary pulls.
std::vector<std::vector<float>> Pulled(shard::RemoteShards& r, int64_t step,
                                       const std::vector<float>& params) {
  std::vector<std::vector<float>> out = {params};
  for (const std::string& name : StateNames()) {
    out.emplace_back(kN);
    EXPECT_TRUE(r.PullState(step, name, out.back().data()).ok());
  }
  return out;
}

std::vector<std::vector<float>> Recovered(shard::RemoteShards& r, int64_t step,
                                          absl::StatusOr<std::vector<int>>* from_replica) {
  std::vector<std::vector<float>> out(1 + StateNames().size(), std::vector<float>(kN, -1.f));
  std::vector<std::pair<std::string, float*>> state;
  for (size_t i = 0; i < StateNames().size(); ++i) {
    state.push_back({StateNames()[i], out[1 + i].data()});
  }
  *from_replica = r.RecoverState(step, out[0].data(), state);
  return out;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Replication, EachRangeIsReplicatedOnTheNextServerBitForBit) {
  Cluster c = StartServers(2);
  auto r = Connect(c.addresses, 1);
  ASSERT_TRUE(r->replicated());
  std::vector<float> params(kN);
  for (int64_t i = 0; i < kN; ++i) params[i] = 0.001f * static_cast<float>(i % 97);
  ASSERT_TRUE(r->InitServers(0, AdamW(), params.data()).ok());
  for (int64_t step = 1; step <= 3; ++step) Step(*r, step, params);
  const std::vector<std::vector<float>> want = Pulled(*r, 3, params);
  // Step 4 was applied only once the replicas acknowledged step 3: no
  // waiting here. Each range read from its replica is the primary's.
  Step(*r, 4, params);
  for (int s = 0; s < 2; ++s) {
    const optim::ParamRange range = r->layout().server_range(s);
    auto holder = shard::ShardClient::Create({c.addresses[(s + 1) % 2], "job"}).value();
    for (size_t b = 0; b < want.size(); ++b) {
      std::vector<float> got(kN, -1.f);
      const std::string name = b == 0 ? "" : StateNames()[b - 1];
      absl::Status st =
          holder->ReadRecovery(v1::RECOVERY_REPLICA, 3, range.lo, range.hi, name, got.data());
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(std::memcmp(got.data() + range.lo, want[b].data() + range.lo,
                            range.size() * sizeof(float)),
                0)
          << "server " << s << " buffer '" << name << "'";
    }
    absl::StatusOr<v1::ShardInfo> info = holder->Info();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->replica_range().begin(), range.lo);
    EXPECT_EQ(info->replica_range().end(), range.hi);
    EXPECT_GE(info->replica_step(), 3);  // 4 once its replication arrived
    EXPECT_LE(info->replica_step(), 4);
    // Two steps of the neighbour's range (params + 2 AdamW buffers) plus
    // its own range's copies from before its last two steps and the
    // gradient it keeps for its replica.
    const int64_t own = r->layout().server_range((s + 1) % 2).size();
    EXPECT_EQ(info->replica_bytes(), (2 * 3 * range.size() + (2 * 3 + 1) * own) * 4);
  }
  const std::string scrape = c.servers[1]->metrics()->Scrape();
  EXPECT_TRUE(absl::StrContains(scrape, "tandem_replica_bytes")) << scrape;
}

TEST(Replication, ALostServerIsRebuiltFromItsReplicaAtTheLastCompletedStep) {
  Cluster c = StartServers(2);
  auto r = Connect(c.addresses, 1);
  std::vector<float> params(kN, 0.5f);
  ASSERT_TRUE(r->InitServers(0, AdamW(), params.data()).ok());
  std::vector<std::vector<float>> want[4];
  for (int64_t step = 1; step <= 3; ++step) {
    Step(*r, step, params);
    want[step] = Pulled(*r, step, params);
  }

  // Step 4 reaches server 0 only (its every chunk is applied there), then
  // server 1 is lost: the workers completed step 3.
  {
    auto to0 = shard::ShardClient::Create({c.addresses[0], "job"}).value();
    std::unique_ptr<shard::PushStream> s = to0->NewPushStream();
    shard::PushHeader h;
    h.generation = 1;
    h.step = 4;
    h.learning_rate = 0.01;
    ASSERT_TRUE(s->Open(h).ok());
    const std::vector<float> g = Gradient(4);
    for (const shard::Chunk& ch : r->layout().chunks()) {
      if (ch.server == 0) ASSERT_TRUE(s->Write(ch, g.data() + ch.lo).ok());
    }
    ASSERT_TRUE(s->Finish().ok());
    std::vector<float> p4(kN);
    const optim::ParamRange r0 = r->layout().server_range(0);
    ASSERT_TRUE(to0->Pull(1, 4, r0.lo, r0.hi, p4.data()).ok());  // applied on server 0
  }
  r.reset();
  c.servers[1].reset();

  // The next generation, before any InitShard. Step 3 from memory when
  // server 1's replication of it had arrived; else its replica is at 2.
  auto next = Connect(c.addresses, 2);
  absl::StatusOr<std::vector<int>> from_replica;
  std::vector<std::vector<float>> got = Recovered(*next, 3, &from_replica);
  if (from_replica.ok()) {
    EXPECT_EQ(*from_replica, std::vector<int>{1});
    for (size_t b = 0; b < got.size(); ++b) EXPECT_TRUE(BitEqual(got[b], want[3][b])) << b;
  } else {
    EXPECT_EQ(from_replica.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(from_replica.status().message(), "its replica"))
        << from_replica.status();
  }
  // Step 2 either way: server 0, two steps past it, still keeps it, and a
  // replica is never more than one step behind its primary.
  got = Recovered(*next, 2, &from_replica);
  ASSERT_TRUE(from_replica.ok()) << from_replica.status();
  EXPECT_EQ(*from_replica, std::vector<int>{1});
  for (size_t b = 0; b < got.size(); ++b) EXPECT_TRUE(BitEqual(got[b], want[2][b])) << b;

  // Step 1 is no longer held for server 0's range (it kept 2 and 3).
  got = Recovered(*next, 1, &from_replica);
  ASSERT_FALSE(from_replica.ok());
  EXPECT_EQ(from_replica.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(from_replica.status().message(), "is at step 4 (kept: 2 and 3)"))
      << from_replica.status();
}

TEST(Replication, AnUnreachableReplicaDoesNotBlockTheWorkers) {
  Cluster c = StartServers(2);
  const std::string dead = c.addresses[1];
  c.servers[1].reset();
  auto client = shard::ShardClient::Create({c.addresses[0], "job", absl::Seconds(20)}).value();
  shard::ShardInit init;
  init.generation = 1;
  init.range = {0, kN};
  init.chunk_elements = kChunk;
  init.world_size = 1;
  init.optimizer.set_name("sgd");
  init.replica_address = dead;
  std::vector<float> params(kN, 1.f);
  ASSERT_TRUE(client->Init(init, params.data()).ok());
  std::unique_ptr<shard::PushStream> s = client->NewPushStream();
  shard::PushHeader h;
  h.generation = 1;
  h.step = 1;
  h.learning_rate = 0.5;
  ASSERT_TRUE(s->Open(h).ok());
  const std::vector<float> g(kN, 1.f);
  for (const shard::Chunk& ch : shard::ShardLayout::CutRange(0, kN, kChunk, 0)) {
    ASSERT_TRUE(s->Write(ch, g.data() + ch.lo).ok());
  }
  ASSERT_TRUE(s->Finish().ok());
  absl::Status pull = client->Pull(1, 1, 0, kN, params.data());
  ASSERT_TRUE(pull.ok()) << pull;
  EXPECT_EQ(params[0], 0.5f);
  EXPECT_EQ(params[kN - 1], 0.5f);
}

TEST(Replication, OneServerHasNoReplica) {
  Cluster c = StartServers(1);
  auto r = Connect(c.addresses, 1);
  EXPECT_FALSE(r->replicated());
  auto off = Connect({"127.0.0.1:1", "127.0.0.1:2"}, 1, /*replicate=*/false);
  EXPECT_FALSE(off->replicated());
}

v1::ReplicaChunk Piece(int64_t generation, int64_t step, float value) {
  v1::ReplicaChunk c;
  c.set_generation(generation);
  c.set_step(step);
  c.mutable_shard_range()->set_begin(10);
  c.mutable_shard_range()->set_end(30);
  c.set_chunk_elements(10);
  c.mutable_range()->set_begin(10);
  c.mutable_range()->set_end(20);
  c.mutable_optimizer()->set_name("sgd");
  c.mutable_params()->set_dtype(v1::DTYPE_F32);
  c.mutable_params()->mutable_data()->assign(std::string(40, '\0'));
  float* p = reinterpret_cast<float*>(c.mutable_params()->mutable_data()->data());
  for (int i = 0; i < 10; ++i) p[i] = value;
  return c;
}

TEST(ReplicaStore, KeepsTheTwoNewestStepsAndRefusesStaleOrBadChunks) {
  ReplicaStore store;
  ASSERT_TRUE(store.Accept(Piece(3, 5, 5.f)).ok());
  ASSERT_TRUE(store.Accept(Piece(3, 6, 6.f)).ok());
  ASSERT_TRUE(store.Accept(Piece(3, 6, 6.f)).ok());  // a repeat
  float out[10];
  ASSERT_TRUE(store.Read(5, "", 10, 20, out).ok());
  EXPECT_EQ(out[9], 5.f);
  ASSERT_TRUE(store.Accept(Piece(3, 7, 7.f)).ok());
  absl::Status gone = store.Read(5, "", 10, 20, out);
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "holds steps")) << gone;
  ASSERT_TRUE(store.Read(6, "", 12, 20, out).ok());
  EXPECT_EQ(out[0], 6.f);
  // The chunk [20, 30) was never sent: no step of the whole range.
  EXPECT_EQ(store.Read(7, "", 10, 30, out).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Read(7, "exp_avg", 10, 20, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Read(7, "", 0, 20, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.info().step, -1);
  EXPECT_EQ(store.info().bytes, 2 * 10 * 4);

  EXPECT_EQ(store.Accept(Piece(2, 8, 8.f)).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::ReplicaChunk bad = Piece(3, 8, 8.f);
  bad.mutable_range()->set_begin(12);
  EXPECT_EQ(store.Accept(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Piece(3, 8, 8.f);
  bad.mutable_params()->mutable_data()->resize(12);
  EXPECT_EQ(store.Accept(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Piece(3, 8, 8.f);
  bad.mutable_optimizer()->set_name("lamb");
  absl::StatusOr<ReplicaStore::Accepted> lamb = store.Accept(bad);
  EXPECT_EQ(lamb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(lamb.status().message(), "lamb")) << lamb.status();
  bad = Piece(3, 8, 8.f);
  bad.add_state_names("momentum_buffer");
  bad.add_state()->CopyFrom(bad.params());
  EXPECT_EQ(store.Accept(bad).status().code(), absl::StatusCode::kInvalidArgument);
  // A gradient of the wrong length, and one with no copy of the step
  // before (the store holds 6 and 7): the full state is asked for.
  v1::ReplicaChunk g = Piece(3, 9, 0.f);
  g.mutable_grad()->set_dtype(v1::DTYPE_F32);
  g.mutable_grad()->mutable_data()->assign(std::string(36, '\0'));
  EXPECT_EQ(store.Accept(g).status().code(), absl::StatusCode::kInvalidArgument);
  g.mutable_grad()->mutable_data()->assign(std::string(40, '\0'));
  absl::StatusOr<ReplicaStore::Accepted> asked = store.Accept(g);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(*asked, ReplicaStore::Accepted::kNeedsState);
  // A newer generation replaces what was held.
  ASSERT_TRUE(store.Accept(Piece(4, 1, 1.f)).ok());
  EXPECT_EQ(store.Read(7, "", 10, 20, out).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.info().generation, 4);
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
