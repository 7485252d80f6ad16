// Bad RPCs: every method of the coordinator and the data server, driven
// with seeded random messages built from the generated descriptors (fields
// set to edge values, random strings, nested messages, repeated fields),
// then serialized and, two times in three, mutated (bytes flipped) or
// truncated, and sent as raw bytes (grpc::GenericStub), half of them without
// the job's token. The servers run in this process over real gRPC.
// Checked: every call ends with a status before its deadline (no hang);
// the servers stay up (a clean call works after the storm, and Shutdown
// returns); and a call the coordinator rejects (INVALID_ARGUMENT,
// FAILED_PRECONDITION, UNAUTHENTICATED, ...) leaves its job status as it
// was. Fixed seed: a failure reproduces.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/auth.h"
#include "common/rpc/channel.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/dataserver.grpc.pb.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"

namespace tandem {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr char kToken[] = "fuzz-token";

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  int Below(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  int64_t Int() {
    static const int64_t kEdges[] = {0, 1, -1, 2, 3, 7, 64, 1000, 1 << 20, INT32_MAX, INT32_MIN,
                                     INT64_MAX, INT64_MIN};
    if (Below(3) == 0) return static_cast<int64_t>(rng_());
    return kEdges[Below(sizeof(kEdges) / sizeof(kEdges[0]))];
  }

  std::string String() {
    static const char* kWords[] = {"", "local", "worker-0", "worker-1", "fashion-mnist/train",
                                   "fashion-mnist/t10k", "/tmp", "../../etc/passwd", "k"};
    if (Below(2) == 0) return kWords[Below(sizeof(kWords) / sizeof(kWords[0]))];
    std::string s(Below(40), '\0');
    // Printable: proto3 strings must be UTF-8 to serialize; the byte flips
    // below put the invalid bytes on the wire.
    for (char& c : s) c = static_cast<char>(32 + rng_() % 95);
    return s;
  }

  void Fill(Message* m, int depth) {
    const Descriptor* d = m->GetDescriptor();
    const Reflection* r = m->GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if (Below(2) == 0) continue;
      const int n = f->is_repeated() ? Below(4) : 1;
      for (int k = 0; k < n; ++k) SetOne(m, r, f, depth);
    }
  }

  // Serialized, then intact, byte-flipped or truncated.
  std::string Mutate(std::string bytes) {
    switch (Below(3)) {
      case 0:
        break;
      case 1:
        for (int k = 0, flips = 1 + Below(4); k < flips && !bytes.empty(); ++k) {
          bytes[Below(static_cast<int>(bytes.size()))] ^= static_cast<char>(1 + Below(255));
        }
        break;
      default:
        bytes.resize(bytes.empty() ? 0 : Below(static_cast<int>(bytes.size())));
        break;
    }
    return bytes;
  }

 private:
  void SetOne(Message* m, const Reflection* r, const FieldDescriptor* f, int depth) {
    const bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        rep ? r->AddInt32(m, f, static_cast<int32_t>(Int())) : r->SetInt32(m, f, static_cast<int32_t>(Int()));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        rep ? r->AddInt64(m, f, Int()) : r->SetInt64(m, f, Int());
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        rep ? r->AddUInt32(m, f, static_cast<uint32_t>(Int())) : r->SetUInt32(m, f, static_cast<uint32_t>(Int()));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        rep ? r->AddUInt64(m, f, static_cast<uint64_t>(Int())) : r->SetUInt64(m, f, static_cast<uint64_t>(Int()));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        rep ? r->AddDouble(m, f, static_cast<double>(Int())) : r->SetDouble(m, f, static_cast<double>(Int()));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        rep ? r->AddFloat(m, f, static_cast<float>(Int())) : r->SetFloat(m, f, static_cast<float>(Int()));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        rep ? r->AddBool(m, f, Below(2) == 0) : r->SetBool(m, f, Below(2) == 0);
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        rep ? r->AddEnumValue(m, f, static_cast<int>(Int() % 8)) : r->SetEnumValue(m, f, static_cast<int>(Int() % 8));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        rep ? r->AddString(m, f, String()) : r->SetString(m, f, String());
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (depth >= 3) return;
        Fill(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f), depth + 1);
        break;
    }
  }

  std::mt19937_64 rng_;
};

grpc::Status CallRaw(grpc::GenericStub& stub, const std::string& method, const std::string& bytes,
                     bool with_token, absl::Duration deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  if (with_token) ctx.AddMetadata(kAuthTokenMetadataKey, kToken);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// The coordinator's observable state, without what moves with the clock.
std::string StateOf(CoordinatorCore& core) {
  v1::GetJobStatusResponse s = core.GetJobStatus();
  for (v1::WorkerStatus& w : *s.mutable_workers()) w.clear_last_heartbeat_unix_millis();
  for (v1::LostWorker& l : *s.mutable_lost()) l.clear_unix_millis();
  return s.SerializeAsString();
}

bool Rejected(grpc::StatusCode c) {
  return c == grpc::StatusCode::INVALID_ARGUMENT || c == grpc::StatusCode::FAILED_PRECONDITION ||
         c == grpc::StatusCode::UNAUTHENTICATED || c == grpc::StatusCode::ALREADY_EXISTS ||
         c == grpc::StatusCode::NOT_FOUND || c == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         c == grpc::StatusCode::INTERNAL || c == grpc::StatusCode::UNIMPLEMENTED;
}

TEST(RpcFuzzTest, CoordinatorAnswersEveryMangledCallAndRejectedOnesChangeNothing) {
  CoordinatorServerOptions o;
  o.coordinator.job_id = "local";
  o.coordinator.min_workers = 1;
  o.coordinator.max_workers = 2;
  o.coordinator.settle_time = absl::Milliseconds(20);
  o.coordinator.state_dir = std::string(std::getenv("TEST_TMPDIR")) + "/fuzz-coordinator";
  o.metrics.port = -1;
  o.auth_token = kToken;
  auto server = CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  // No token on the channel: each call adds it (or not) itself.
  grpc::GenericStub stub(MakeChannel({.target = absl::StrCat("127.0.0.1:", (*server)->port())}));
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      "tandem.v1.Coordinator");
  ASSERT_NE(service, nullptr);
  Fuzzer fuzz(20261203);
  int calls = 0, rejected = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      std::unique_ptr<Message> m(
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->input_type())->New());
      fuzz.Fill(m.get(), 0);
      const std::string bytes = fuzz.Mutate(m->SerializeAsString());
      const bool with_token = fuzz.Below(2) == 0;
      const std::string before = StateOf((*server)->core());
      grpc::Status s = CallRaw(stub, absl::StrCat("/", service->full_name(), "/", method->name()),
                               bytes, with_token, absl::Milliseconds(300));
      ++calls;
      // Without the token: refused, or (bytes that do not parse) failed by
      // gRPC before any handler ran: INTERNAL for a sync method,
      // UNIMPLEMENTED for a callback one (Attach: gRPC answers a request it
      // cannot deserialize that way).
      if (!with_token) {
        std::unique_ptr<Message> parsed(m->New());
        const bool parses = parsed->ParseFromString(bytes);
        EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                    (!parses && (s.error_code() == grpc::StatusCode::INTERNAL ||
                                 s.error_code() == grpc::StatusCode::UNIMPLEMENTED)))
            << method->name() << ": " << s.error_code() << " " << s.error_message()
            << (parses ? " (the bytes parse)" : " (the bytes do not parse)");
      }
      if (Rejected(s.error_code())) {
        ++rejected;
        EXPECT_EQ(StateOf((*server)->core()), before)
            << method->name() << " rejected (" << s.error_message() << ") but changed the state";
      }
    }
  }
  EXPECT_GT(rejected, calls / 3);
  // Still serving: a clean status call answers.
  auto clean = v1::Coordinator::NewStub(MakeChannel(
      {.target = absl::StrCat("127.0.0.1:", (*server)->port()), .auth_token = kToken}));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::GetJobStatusRequest req;
  v1::GetJobStatusResponse resp;
  EXPECT_TRUE(clean->GetJobStatus(&ctx, req, &resp).ok());
  // A KvGet asking to wait "forever" waits no longer than its deadline.
  grpc::ClientContext kv_ctx;
  kv_ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(300)));
  v1::KvGetRequest kv;
  kv.mutable_job()->set_job_id("local");
  kv.set_generation(resp.generation());
  kv.add_keys("never-set");
  kv.set_timeout_ms(INT64_MAX);
  v1::KvGetResponse kv_resp;
  const grpc::Status kv_status = clean->KvGet(&kv_ctx, kv, &kv_resp);
  EXPECT_FALSE(kv_status.ok());
  (*server)->Shutdown();  // returns: no handler is stuck
}

TEST(RpcFuzzTest, DataServerAnswersEveryMangledCall) {
  dataserver::DataServerOptions o;
  o.datasets = {{"fashion-mnist/t10k", "/usr/share/datasets/fashion-mnist/t10k"}};
  o.service.decode_threads = 1;
  o.service.auth_token = kToken;
  auto server = dataserver::DataServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::GenericStub stub(MakeChannel({.target = (*server)->address()}));
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      "tandem.v1.DataServer");
  ASSERT_NE(service, nullptr);
  Fuzzer fuzz(7);
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      std::unique_ptr<Message> m(
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->input_type())->New());
      fuzz.Fill(m.get(), 0);
      const bool with_token = fuzz.Below(2) == 0;
      // Server-streaming methods too: the unary call sends one request and
      // takes the first reply (or the status); the deadline ends the rest.
      grpc::Status s =
          CallRaw(stub, absl::StrCat("/", service->full_name(), "/", method->name()),
                  fuzz.Mutate(m->SerializeAsString()), with_token, absl::Milliseconds(300));
      if (!with_token) {
        EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                    s.error_code() == grpc::StatusCode::INTERNAL)
            << method->name() << ": " << s.error_code() << " " << s.error_message();
      }
    }
  }
  auto clean = v1::DataServer::NewStub(MakeChannel({.target = (*server)->address(),
                                                    .auth_token = kToken}));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListDatasetsRequest req;
  v1::ListDatasetsResponse resp;
  ASSERT_TRUE(clean->ListDatasets(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.datasets_size(), 1);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace tandem
