#include "services/shardserver/shard_service.h"

#include "common/rpc/auth.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/codec/int8_codec.h"
#include "common/rpc/grpc_status.h"
#include "common/shard/optimizer_config.h"
#include "common/status/status_macros.h"
#include "common/timing/seconds_since.h"
#include "common/trace/trace.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kDefaultPullBytes = int64_t{4} << 20;

// One pull answer; the last goes out with the call's status in one batch
// (one socket write and one wake-up of the client fewer per pull). A
// status other than OK after it is then impossible: nothing fails later.
bool WritePiece(grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* writer,
                const grpc::ByteBuffer& buffer, bool last) {
  if (last) {
    writer->WriteLast(buffer, grpc::WriteOptions());
    return true;
  }
  return writer->Write(buffer);
}

// Indices in the generated service (its rpcs in proto order).
constexpr int kPushGradientsMethod = 2;
constexpr int kPullParametersMethod = 3;

const float* Floats(const v1::Tensor& t) { return reinterpret_cast<const float*>(t.data().data()); }

// The int8 codec's chunk sizes the codec factory accepts (codec_factory.h).
constexpr int kMinInt8Chunk = 256;
constexpr int kMaxInt8Chunk = 2048;

}  // namespace

absl::Status CheckInt8Payload(int dtype, int64_t bytes, const v1::FlatRange& range,
                              int int8_chunk, const char* what) {
  if (int8_chunk < kMinInt8Chunk || int8_chunk > kMaxInt8Chunk) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of [", range.begin(), ", ", range.end(),
                                                   "): int8_chunk ", int8_chunk, " outside [",
                                                   kMinInt8Chunk, ", ", kMaxInt8Chunk, "]"));
  }
  if (dtype != v1::DTYPE_I8) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of [", range.begin(), ", ", range.end(),
                                                   "): int8_chunk set but dtype ",
                                                   v1::DType_Name(static_cast<v1::DType>(dtype)),
                                                   ", an int8 block is DTYPE_I8"));
  }
  const int64_t n = range.end() - range.begin();
  const int64_t want = n <= 0 ? 0 : (n + int8_chunk - 1) / int8_chunk * 4 + n;
  if (n < 0 || bytes != want) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of [", range.begin(), ", ", range.end(),
                                                   "): ", bytes,
                                                   " bytes, an int8 block of it at ", int8_chunk,
                                                   " values per scale has ", want));
  }
  return absl::OkStatus();
}

absl::Status CheckF32Payload(int dtype, int64_t bytes, const v1::FlatRange& range,
                             const char* what) {
  if (dtype != v1::DTYPE_F32) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of [", range.begin(), ", ", range.end(),
                                                   "): dtype ", v1::DType_Name(static_cast<v1::DType>(dtype)),
                                                   ", the shard server takes DTYPE_F32"));
  }
  const int64_t n = range.end() - range.begin();
  if (n < 0 || bytes != n * int64_t{sizeof(float)}) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of [", range.begin(), ", ", range.end(),
                                                   "): ", bytes, " bytes, expected ",
                                                   n * int64_t{sizeof(float)}));
  }
  return absl::OkStatus();
}

ShardService::ShardService(RangeStore* store, const ShardMetrics* metrics,
                           std::string auth_token, ReplicaStore* replica)
    : store_(store), replica_(replica), auth_token_(std::move(auth_token)), metrics_(metrics) {
  // gRPC owns the handlers (the methods keep them).
  using Raw = grpc::internal::BidiStreamingHandler<ShardService, grpc::ByteBuffer, grpc::ByteBuffer>;
  MarkMethodStreamed(kPushGradientsMethod, new Raw(std::mem_fn(&ShardService::PushGradients), this));
  MarkMethodStreamed(kPullParametersMethod,
                     new Raw(std::mem_fn(&ShardService::PullParameters), this));
}

absl::Status ShardService::CheckJob(const v1::JobRef& job) const {
  const std::string mine = store_->info().job_id;
  if (!job.job_id().empty() && !mine.empty() && job.job_id() != mine) {
    return absl::InvalidArgumentError(
        absl::StrCat("request for job '", job.job_id(), "' but this shard server serves '", mine,
                     "'"));
  }
  return absl::OkStatus();
}

grpc::Status ShardService::GetShardInfo(grpc::ServerContext* context,
                                        const v1::GetShardInfoRequest*,
                                        v1::ShardInfo* response) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  const StoreInfo i = store_->info();
  response->mutable_range()->set_begin(i.range.lo);
  response->mutable_range()->set_end(i.range.hi);
  response->set_step(i.step);
  response->set_expected_pushers(i.world_size);
  *response->mutable_optimizer() = i.optimizer;
  response->set_master_dtype(v1::DTYPE_F32);
  response->set_generation(i.generation);
  response->set_chunk_elements(i.chunk_elements);
  response->set_chunks(i.chunks);
  int64_t replica_bytes = store_->kept_bytes();
  if (replica_ != nullptr) {
    const ReplicaInfo r = replica_->info();
    if (r.generation > 0) {
      response->mutable_replica_range()->set_begin(r.range.lo);
      response->mutable_replica_range()->set_end(r.range.hi);
      response->set_replica_step(r.step);
    }
    replica_bytes += r.bytes;
  }
  response->set_replica_bytes(replica_bytes);
  return grpc::Status::OK;
}

absl::Status ShardService::Init(grpc::ServerReader<v1::ParameterChunk>* reader,
                                v1::InitShardResponse* response) {
  v1::ParameterChunk msg;
  if (!reader->Read(&msg)) return absl::InvalidArgumentError("InitShard: empty stream");
  InitConfig c;
  c.job_id = msg.job().job_id();
  c.generation = msg.generation();
  c.step = msg.step();
  c.range = {msg.shard_range().begin(), msg.shard_range().end()};
  c.chunk_elements = msg.chunk_elements();
  c.world_size = msg.world_size();
  c.optimizer = msg.optimizer();
  c.apply_per_chunk = msg.apply_per_chunk();
  c.pull_int8_chunk = msg.pull_int8_chunk();
  c.replica_address = msg.replica_address();
  ASSIGN_OR_RETURN(std::unique_ptr<RangeStore::PendingInit> init, store_->BeginInit(c));
  do {
    RETURN_IF_ERROR(CheckF32Payload(msg.data().dtype(),
                                    static_cast<int64_t>(msg.data().data().size()), msg.range(),
                                    "InitShard"));
    const int64_t n = msg.range().end() - msg.range().begin();
    if (msg.state_name().empty()) {
      RETURN_IF_ERROR(init->Fill(msg.range().begin(), Floats(msg.data()), n));
    } else {
      RETURN_IF_ERROR(init->FillState(msg.state_name(), msg.range().begin(), Floats(msg.data()), n));
    }
  } while (reader->Read(&msg));
  ASSIGN_OR_RETURN(bool kept, store_->CommitInit(std::move(init)));
  response->set_elements(c.range.size());
  response->set_kept_optimizer_state(kept);
  return absl::OkStatus();
}

grpc::Status ShardService::InitShard(grpc::ServerContext* context,
                                     grpc::ServerReader<v1::ParameterChunk>* reader,
                                     v1::InitShardResponse* response) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(Init(reader, response));
}

namespace {

// The payload where it lies when it arrived as one piece aligned for
// `align`, else copied into *staging (grown to the largest chunk once).
absl::StatusOr<const void*> PayloadBytes(const shard::ChunkView& view, size_t align,
                                         std::vector<float>* staging) {
  if (const void* p = view.Contiguous(align); p != nullptr) return p;
  const int64_t bytes = view.payload_bytes();
  const size_t floats = static_cast<size_t>((bytes + 3) / 4);
  if (staging->size() < floats) staging->resize(floats);
  RETURN_IF_ERROR(view.CopyPayload(staging->data(), bytes));
  return static_cast<const void*>(staging->data());
}

}  // namespace

absl::Status ShardService::Push(grpc::ServerContext* context, PieceStream* stream,
                                v1::PushGradientsResponse* response) {
  grpc::ByteBuffer raw;
  shard::ChunkView view;
  v1::GradientChunk msg;  // every field but data (the payload stays in `raw`)
  int64_t bytes = 0, chunks = 0, dups = 0, generation = 0, step = 0;
  // int8 pushes are dequantized here, then summed in fp32 like any push.
  // One buffer each per stream, grown to the largest chunk (not per message).
  std::vector<float> decoded, staging;
  std::unique_ptr<codec::Codec> int8;
  int int8_chunk = 0;
  while (stream->Read(&raw)) {
    RETURN_IF_ERROR(view.Decode(raw, shard::kGradientChunkData, &msg));
    RETURN_IF_ERROR(CheckJob(msg.job()));
    const int64_t size = view.payload_bytes();
    const float* values = nullptr;
    if (msg.int8_chunk() != 0) {
      RETURN_IF_ERROR(CheckInt8Payload(view.dtype(), size, msg.range(), msg.int8_chunk(), "push"));
      if (int8 == nullptr || int8_chunk != msg.int8_chunk()) {
        int8_chunk = msg.int8_chunk();
        int8 = codec::MakeInt8Codec({.chunk = int8_chunk});
      }
      ASSIGN_OR_RETURN(const void* block, PayloadBytes(view, 1, &staging));
      const int64_t n = msg.range().end() - msg.range().begin();
      if (static_cast<int64_t>(decoded.size()) < n) decoded.resize(n);
      int8->Decode(static_cast<const uint8_t*>(block), n, decoded.data());
      values = decoded.data();
    } else {
      RETURN_IF_ERROR(CheckF32Payload(view.dtype(), size, msg.range(), "push"));
      // Summed straight from the received slice when it is one piece.
      ASSIGN_OR_RETURN(const void* floats, PayloadBytes(view, alignof(float), &staging));
      values = static_cast<const float*>(floats);
    }
    PushHeader h;
    h.generation = msg.generation();
    h.step = msg.step();
    h.lo = msg.range().begin();
    h.hi = msg.range().end();
    h.rank = msg.rank();
    h.weight = msg.weight();
    h.learning_rate = msg.learning_rate();
    h.grad_scale = msg.grad_scale();
    trace::Span span("push chunk", "shard", size, h.step);
    ASSIGN_OR_RETURN(PushOutcome o, store_->Push(h, values, h.hi - h.lo));
    bytes += size;
    ++chunks;
    generation = h.generation;
    step = h.step;
    if (o == PushOutcome::kDuplicate) ++dups;
    response->set_step(h.step);
    if (metrics_ != nullptr && metrics_->push_bytes != nullptr) {
      metrics_->push_bytes->Increment(size);
    }
  }
  response->set_bytes_received(bytes);
  response->set_chunks(chunks);
  response->set_duplicates(dups);
  if (chunks == 0) return absl::OkStatus();
  // A worker notes step S as done once its pushes of S are acknowledged
  // (its pulls of S may still be landing): the replica must hold S - 1 by
  // then, so a recovery finds a step the workers noted (replicator.h).
  // Usually it does already: its send overlapped the step's compute.
  const absl::Time deadline = context->deadline() == std::chrono::system_clock::time_point::max()
                                  ? absl::InfiniteFuture()
                                  : absl::FromChrono(context->deadline());
  return store_->WaitReplicated(generation, step - 1, deadline);
}

grpc::Status ShardService::PushGradients(grpc::ServerContext* context, PieceStream* stream) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  const auto start = std::chrono::steady_clock::now();
  v1::PushGradientsResponse response;
  grpc::Status s = ToGrpcStatus(Push(context, stream, &response));
  if (s.ok()) {
    // The one answer of a client stream, sent with the status.
    grpc::ByteBuffer out;
    bool own = true;
    s = grpc::SerializationTraits<v1::PushGradientsResponse>::Serialize(response, &out, &own);
    if (s.ok()) stream->WriteLast(out, grpc::WriteOptions());
  }
  if (metrics_ != nullptr && metrics_->push_seconds != nullptr) {
    metrics_->push_seconds->Observe(SecondsSince(start));
  }
  return s;
}

absl::Status ShardService::Pull(grpc::ServerContext* context,
                                const v1::PullParametersRequest& r,
                                PieceStream* writer) {
  RETURN_IF_ERROR(CheckJob(r.job()));
  if (r.recovery() != v1::RECOVERY_NONE) return PullRecovery(r, writer);
  const bool delta = r.dtype() == v1::DTYPE_I8;
  if (r.dtype() != v1::DTYPE_F32 && r.dtype() != v1::DTYPE_UNSPECIFIED && !delta) {
    return absl::UnimplementedError(absl::StrCat(
        "pull in ", v1::DType_Name(r.dtype()),
        ": this shard server sends DTYPE_F32, or DTYPE_I8 deltas (pull_int8_chunk)"));
  }
  if (delta && (!r.state_name().empty() || r.reset_delta_reference())) {
    return absl::InvalidArgumentError(
        "int8 pull: deltas are of the parameters only (no state_name, no reset_delta_reference)");
  }
  if (r.chunk_bytes() < 0 || r.timeout_ms() < 0) {
    return absl::InvalidArgumentError("pull: chunk_bytes and timeout_ms must be >= 0");
  }
  const int64_t lo = r.range().begin(), hi = r.range().end();
  // No deadline on the call: gRPC's is time_point::max(), which FromChrono
  // would overflow.
  absl::Time deadline = context->deadline() == std::chrono::system_clock::time_point::max()
                            ? absl::InfiniteFuture()
                            : absl::FromChrono(context->deadline());
  if (r.timeout_ms() > 0) deadline = std::min(deadline, absl::Now() + absl::Milliseconds(r.timeout_ms()));
  {
    trace::Span span("pull wait", "shard", -1, r.step());
    RETURN_IF_ERROR(store_->WaitForStep(r.generation(), r.step(), deadline, lo, hi));
  }
  if (delta) return PullDelta(r, writer);
  return StreamFloats(r, writer, /*count=*/true, [&](int64_t at, int64_t end, float* out) {
    if (r.state_name().empty()) {
      return store_->ReadParams(r.generation(), r.step(), at, end, out, r.reset_delta_reference());
    }
    return store_->ReadState(r.generation(), r.step(), r.state_name(), at, end, out);
  });
}

absl::Status ShardService::StreamFloats(
    const v1::PullParametersRequest& r, PieceStream* writer, bool count,
    const std::function<absl::Status(int64_t, int64_t, float*)>& read) {
  const int64_t lo = r.range().begin(), hi = r.range().end();
  const int64_t piece =
      std::max<int64_t>(1, (r.chunk_bytes() > 0 ? r.chunk_bytes() : kDefaultPullBytes) / 4);
  shard::ParameterEncoder encoder;
  encoder.SetFields(r.job().job_id(), r.step(), r.state_name(), v1::DTYPE_F32);
  grpc::ByteBuffer buffer;
  for (int64_t at = lo; at < hi || (at == lo && lo == hi); at += piece) {
    const int64_t end = std::min(hi, at + piece);
    const size_t bytes = (end - at) * sizeof(float);
    trace::Span span("pull chunk", "shard", static_cast<int64_t>(bytes), r.step());
    // The store copies straight into the slice gRPC sends (ours alone until
    // the buffer below takes it).
    grpc::Slice payload(bytes);
    RETURN_IF_ERROR(read(at, end, reinterpret_cast<float*>(const_cast<uint8_t*>(payload.begin()))));
    encoder.Encode(at, end, 0, payload, &buffer);
    if (!WritePiece(writer, buffer, end >= hi)) {
      return absl::CancelledError("pull: the client went away");
    }
    if (count && metrics_ != nullptr && metrics_->pull_bytes != nullptr) {
      metrics_->pull_bytes->Increment(bytes);
    }
    if (lo == hi) break;
  }
  return absl::OkStatus();
}

absl::Status ShardService::PullRecovery(const v1::PullParametersRequest& r,
                                        PieceStream* writer) {
  if (r.recovery() == v1::RECOVERY_REPLICA && replica_ == nullptr) {
    return absl::FailedPreconditionError("recovery read: this shard server keeps no replicas");
  }
  if (r.dtype() != v1::DTYPE_F32 && r.dtype() != v1::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError("recovery read: DTYPE_F32 only");
  }
  return StreamFloats(r, writer, /*count=*/false, [&](int64_t at, int64_t end, float* out) {
    if (r.recovery() == v1::RECOVERY_REPLICA) {
      return replica_->Read(r.step(), r.state_name(), at, end, out);
    }
    return store_->ReadKept(r.step(), r.state_name(), at, end, out);
  });
}

grpc::Status ShardService::Replicate(grpc::ServerContext* context,
                                     const v1::ReplicaChunk* request, v1::ReplicaAck* response) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(AcceptReplica(*request, response));
}

grpc::Status ShardService::ReplicateStream(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::ReplicaChunk>* reader,
                                           v1::ReplicaAcks* response) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  v1::ReplicaChunk chunk;
  while (reader->Read(&chunk)) {
    absl::Status s = AcceptReplica(chunk, response->add_acks());
    if (!s.ok()) return ToGrpcStatus(s);
  }
  return grpc::Status::OK;
}

absl::Status ShardService::AcceptReplica(const v1::ReplicaChunk& chunk, v1::ReplicaAck* ack) {
  if (replica_ == nullptr) {
    return absl::FailedPreconditionError("Replicate: this server keeps no replicas");
  }
  ASSIGN_OR_RETURN(ReplicaStore::Accepted a, replica_->Accept(chunk));
  const int64_t bytes = replica_->info().bytes;
  ack->set_step(chunk.step());
  ack->set_replica_bytes(bytes);
  ack->set_needs_state(a == ReplicaStore::Accepted::kNeedsState);
  if (metrics_ != nullptr && metrics_->replica_bytes != nullptr) {
    metrics_->replica_bytes->Set(static_cast<double>(bytes + store_->kept_bytes()));
  }
  return absl::OkStatus();
}

absl::Status ShardService::PullDelta(const v1::PullParametersRequest& r, PieceStream* writer) {
  const int64_t lo = r.range().begin(), hi = r.range().end();
  std::string block;
  RETURN_IF_ERROR(store_->ReadDelta(r.generation(), r.step(), lo, hi, &block));
  const int64_t piece = r.chunk_bytes() > 0 ? r.chunk_bytes() : kDefaultPullBytes;
  const int64_t size = static_cast<int64_t>(block.size());
  shard::ParameterEncoder encoder;
  encoder.SetFields(r.job().job_id(), r.step(), "", v1::DTYPE_I8);
  grpc::ByteBuffer buffer;
  for (int64_t at = 0; at < size || at == 0; at += piece) {
    const int64_t end = std::min(size, at + piece);
    encoder.Encode(lo, hi, at, grpc::Slice(block.data() + at, end - at), &buffer);
    if (!WritePiece(writer, buffer, end >= size)) {
      return absl::CancelledError("pull: the client went away");
    }
    if (metrics_ != nullptr && metrics_->pull_bytes != nullptr) {
      metrics_->pull_bytes->Increment(end - at);
    }
    if (size == 0) break;
  }
  return absl::OkStatus();
}

grpc::Status ShardService::PullParameters(grpc::ServerContext* context, PieceStream* stream) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  const auto start = std::chrono::steady_clock::now();
  grpc::ByteBuffer raw;
  v1::PullParametersRequest request;
  grpc::Status s;
  if (!stream->Read(&raw)) {
    s = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "PullParameters: no request message");
  } else if (!grpc::SerializationTraits<v1::PullParametersRequest>::Deserialize(&raw, &request)
                  .ok()) {
    s = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     "PullParameters: the request does not parse as a PullParametersRequest");
  } else {
    s = ToGrpcStatus(Pull(context, request, stream));
  }
  if (metrics_ != nullptr && metrics_->pull_seconds != nullptr) {
    metrics_->pull_seconds->Observe(SecondsSince(start));
  }
  return s;
}

absl::Status ShardService::Save(const v1::SaveShardRequest& r, v1::SaveShardResponse* response) {
  RETURN_IF_ERROR(CheckJob(r.job()));
  if (r.path().empty() && r.mode() != v1::SAVE_SNAPSHOT) {
    return absl::InvalidArgumentError("SaveShard: empty path");
  }
  absl::MutexLock lock(&snapshot_mu_);
  ShardSnapshot now;
  ShardSnapshot* s = r.mode() == v1::SAVE_NOW ? &now : &snapshot_;
  if (r.mode() != v1::SAVE_FROM_SNAPSHOT) {
    // Copies out under the store's locks (a consistent step), writes after.
    RETURN_IF_ERROR(CaptureShard(*store_, r.generation(), r.step(), s));
  } else if (s->step != r.step() || s->step < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SaveShard from the snapshot of step ", r.step(), ": the server's snapshot holds ",
        s->step < 0 ? std::string("nothing") : absl::StrCat("step ", s->step),
        " (SAVE_SNAPSHOT first)"));
  }
  response->mutable_range()->set_begin(s->range.lo);
  response->mutable_range()->set_end(s->range.hi);
  if (r.mode() == v1::SAVE_SNAPSHOT) {
    response->set_bytes(s->bytes());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const int64_t bytes, WriteShardFile(*s, r));
  response->set_path(r.path());
  response->set_bytes(bytes);
  return absl::OkStatus();
}

grpc::Status ShardService::SaveShard(grpc::ServerContext* context,
                                     const v1::SaveShardRequest* request,
                                     v1::SaveShardResponse* response) {
  if (grpc::Status auth = CheckCallToken(*context, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(Save(*request, response));
}

}  // namespace shardserver
}  // namespace tandem
