// The shard server's raw push and pull handlers (shard_service.h) against
// plain protobuf clients, and against bytes no client should send: the
// wire stays what the generated code speaks, and bad input is refused
// with a status that says what is wrong.
#include <memory>
#include <string>
#include <vector>

#include "common/rpc/channel.h"
#include "common/shard/shard_client.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/shardserver.grpc.pb.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kN = 600;

struct Fixture {
  std::unique_ptr<ShardServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ShardServer::Stub> stub;
};

Fixture Start(int world) {
  Fixture f;
  f.server = ShardServer::Start({}).value();
  ChannelOptions co;
  co.target = f.server->address();
  f.channel = MakeChannel(co);
  f.stub = v1::ShardServer::NewStub(f.channel);
  auto client = shard::ShardClient::Create({f.server->address(), "job", absl::Seconds(20)});
  EXPECT_TRUE(client.ok());
  shard::ShardInit init;
  init.generation = 2;
  init.range = {0, kN};
  init.chunk_elements = 300;
  init.world_size = world;
  init.optimizer.set_name("sgd");
  std::vector<float> params(kN, 1.f);
  EXPECT_TRUE((*client)->Init(init, params.data()).ok());
  return f;
}

v1::GradientChunk Push(int64_t lo, int64_t hi, float value) {
  v1::GradientChunk m;
  m.mutable_job()->set_job_id("job");
  m.set_generation(2);
  m.set_step(1);
  m.mutable_range()->set_begin(lo);
  m.mutable_range()->set_end(hi);
  m.set_weight(1);
  m.set_learning_rate(0.5);
  m.set_grad_scale(1);
  m.mutable_data()->set_dtype(v1::DTYPE_F32);
  std::vector<float> g(hi - lo, value);
  m.mutable_data()->set_data(reinterpret_cast<const char*>(g.data()), g.size() * sizeof(float));
  return m;
}

TEST(ShardWire, ProtobufPushesAndPullsStillWork) {
  Fixture f = Start(1);
  grpc::ClientContext ctx;
  v1::PushGradientsResponse response;
  auto writer = f.stub->PushGradients(&ctx, &response);
  ASSERT_TRUE(writer->Write(Push(0, 300, 2.f)));
  ASSERT_TRUE(writer->Write(Push(300, kN, 4.f)));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(response.chunks(), 2);
  EXPECT_EQ(response.bytes_received(), kN * 4);

  grpc::ClientContext pull_ctx;
  v1::PullParametersRequest req;
  req.mutable_job()->set_job_id("job");
  req.set_generation(2);
  req.set_step(1);
  req.mutable_range()->set_begin(0);
  req.mutable_range()->set_end(kN);
  req.set_chunk_bytes(1000);  // several answers, the last with the status
  auto reader = f.stub->PullParameters(&pull_ctx, req);
  v1::ParameterChunk m;
  int64_t got = 0;
  while (reader->Read(&m)) {
    ASSERT_EQ(m.range().begin(), got);
    ASSERT_EQ(m.data().data().size(), (m.range().end() - m.range().begin()) * 4);
    const float* v = reinterpret_cast<const float*>(m.data().data().data());
    for (int64_t i = m.range().begin(); i < m.range().end(); ++i) {
      // sgd at lr 0.5 from 1: 1 - 0.5 * g.
      EXPECT_FLOAT_EQ(v[i - m.range().begin()], i < 300 ? 0.f : -1.f) << i;
    }
    EXPECT_EQ(m.step(), 1);
    got = m.range().end();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(got, kN);
}

// Raw bytes sent to PushGradients; the call's status.
grpc::Status RawPush(Fixture& f, const std::vector<std::string>& messages) {
  grpc::internal::RpcMethod method("/tandem.v1.ShardServer/PushGradients",
                                   grpc::internal::RpcMethod::CLIENT_STREAMING, f.channel);
  grpc::ClientContext ctx;
  v1::PushGradientsResponse response;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> w(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(f.channel.get(), method, &ctx,
                                                                    &response));
  for (const std::string& m : messages) {
    grpc::Slice s(m);
    if (!w->Write(grpc::ByteBuffer(&s, 1))) break;
  }
  w->WritesDone();
  return w->Finish();
}

TEST(ShardWire, ShortAndGarbledPushesAreRefusedClearly) {
  Fixture f = Start(2);
  // A payload one float short of its range.
  v1::GradientChunk short_push = Push(0, 300, 1.f);
  short_push.mutable_data()->mutable_data()->resize(299 * 4);
  grpc::Status s = RawPush(f, {short_push.SerializeAsString()});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("1196 bytes, expected 1200"), std::string::npos)
      << s.error_message();
  // A message cut inside its payload.
  const std::string whole = Push(0, 300, 1.f).SerializeAsString();
  s = RawPush(f, {whole.substr(0, whole.size() - 100)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_NE(s.error_message().find("garbled"), std::string::npos) << s.error_message();
  // Bytes that are no message at all.
  s = RawPush(f, {std::string("\x0f\xff\xff", 3)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  // Nothing of the above was summed: a whole push of rank 0 is the first.
  s = RawPush(f, {whole});
  EXPECT_TRUE(s.ok()) << s.error_message();
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
