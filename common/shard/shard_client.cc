#include "common/shard/shard_client.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"
#include "common/log/log.h"
#include "grpcpp/support/sync_stream.h"

namespace tandem {
namespace shard {
namespace {

constexpr int64_t kInitPieceFloats = int64_t{1} << 20;  // 4 MiB
constexpr char kPushMethod[] = "/tandem.v1.ShardServer/PushGradients";
constexpr char kPullMethod[] = "/tandem.v1.ShardServer/PullParameters";

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(true);  // a server (re)starting is not an error yet
}

}  // namespace

PushStream::PushStream(grpc::ChannelInterface* channel, const grpc::internal::RpcMethod* method,
                       const ShardClientOptions* options)
    : channel_(channel), method_(method), options_(options) {}

PushStream::~PushStream() { Cancel(); }

absl::Status PushStream::Open(const PushHeader& h) {
  if (writer_ != nullptr) {
    return absl::FailedPreconditionError("push stream: Open while a stream is open");
  }
  context_ = std::make_unique<grpc::ClientContext>();
  SetDeadline(context_.get(), options_->timeout);
  response_.Clear();
  writer_.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
      channel_, *method_, context_.get(), &response_));
  v1::GradientChunk fields;
  fields.mutable_job()->set_job_id(options_->job_id);
  fields.set_generation(h.generation);
  fields.set_step(h.step);
  fields.set_rank(h.rank);
  fields.set_weight(h.weight);
  fields.set_learning_rate(h.learning_rate);
  fields.set_grad_scale(h.grad_scale);
  fields.set_int8_chunk(h.int8_chunk);
  fields.mutable_data()->set_dtype(h.int8_chunk > 0 ? v1::DTYPE_I8 : v1::DTYPE_F32);
  encoder_.SetFields(fields);
  header_ = h;
  return absl::OkStatus();
}

void PushStream::Released(void* self) {
  PushStream* s = static_cast<PushStream*>(self);
  absl::MutexLock lock(&s->mu_);
  --s->held_;
}

void PushStream::AwaitReleased() {
  absl::MutexLock lock(&mu_);
  auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ == 0; };
  // gRPC drops a finished call's references at once, or on its own thread
  // just after: this wait is normally empty.
  if (!mu_.AwaitWithTimeout(absl::Condition(&released), absl::Seconds(30))) {
    LOG(ERROR) << "push stream to " << options_->address << ": gRPC still holds " << held_
               << " payload slice(s) 30 s after the call ended";
  }
}

absl::Status PushStream::Write(const Chunk& c, const void* data) {
  if (writer_ == nullptr) return absl::FailedPreconditionError("push stream: Write before Open");
  const int64_t bytes = PushPayloadBytes(header_, c.size());
  {
    absl::MutexLock lock(&mu_);
    ++held_;
  }
  // A slice over the caller's memory: gRPC writes it to the socket from
  // there and calls Released when it lets go.
  encoder_.Encode(c.lo, c.hi,
                  grpc::Slice(const_cast<void*>(data), static_cast<size_t>(bytes),
                              &PushStream::Released, this),
                  &buffer_);
  const bool written = writer_->Write(buffer_);
  buffer_.Clear();
  if (!written) {
    // The server ended the stream (a refusal) or the connection broke:
    // Finish says which.
    absl::StatusOr<v1::PushGradientsResponse> r = Finish();
    return r.ok() ? absl::UnavailableError(absl::StrCat("push to ", options_->address,
                                                        ": stream closed early"))
                  : r.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::PushGradientsResponse> PushStream::Finish() {
  if (writer_ == nullptr) return absl::FailedPreconditionError("push stream: Finish before Open");
  writer_->WritesDone();
  grpc::Status s = writer_->Finish();
  writer_.reset();
  context_.reset();
  AwaitReleased();
  if (!s.ok()) {
    return FromGrpcStatus(s, absl::StrCat("ShardServer.PushGradients to ", options_->address));
  }
  return response_;
}

void PushStream::Cancel() {
  if (writer_ == nullptr) return;
  context_->TryCancel();
  (void)writer_->Finish();
  writer_.reset();
  context_.reset();
  AwaitReleased();
}

ShardClient::ShardClient(const ShardClientOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Create(const ShardClientOptions& o) {
  if (o.address.empty()) return absl::InvalidArgumentError("shard client: empty server address");
  std::unique_ptr<ShardClient> c(new ShardClient(o));
  ChannelOptions co;
  co.target = o.address;
  co.flow_window_bytes = o.flow_window_bytes;
  c->channel_ = MakeChannel(co);
  c->stub_ = v1::ShardServer::NewStub(c->channel_);
  c->push_method_ = std::make_unique<grpc::internal::RpcMethod>(
      kPushMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, c->channel_);
  c->pull_method_ = std::make_unique<grpc::internal::RpcMethod>(
      kPullMethod, grpc::internal::RpcMethod::SERVER_STREAMING, c->channel_);
  return c;
}

std::unique_ptr<PushStream> ShardClient::NewPushStream() {
  return std::make_unique<PushStream>(channel_.get(), push_method_.get(), &options_);
}

absl::StatusOr<v1::ShardInfo> ShardClient::Info() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  v1::GetShardInfoRequest req;
  req.mutable_job()->set_job_id(options_.job_id);
  v1::ShardInfo info;
  grpc::Status s = stub_->GetShardInfo(&ctx, req, &info);
  if (!s.ok()) return FromGrpcStatus(s, absl::StrCat("ShardServer.GetShardInfo to ", address()));
  return info;
}

absl::StatusOr<v1::SaveShardResponse> ShardClient::Save(v1::SaveShardRequest request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  request.mutable_job()->set_job_id(options_.job_id);
  v1::SaveShardResponse response;
  grpc::Status s = stub_->SaveShard(&ctx, request, &response);
  if (!s.ok()) return FromGrpcStatus(s, absl::StrCat("ShardServer.SaveShard to ", address()));
  return response;
}

absl::StatusOr<bool> ShardClient::Init(
    const ShardInit& init, const float* params,
    const std::vector<std::pair<std::string, const float*>>& state) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  v1::InitShardResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::ParameterChunk>> w = stub_->InitShard(&ctx, &response);
  v1::ParameterChunk msg;
  msg.mutable_job()->set_job_id(options_.job_id);
  msg.set_step(init.step);
  *msg.mutable_optimizer() = init.optimizer;
  msg.set_generation(init.generation);
  msg.mutable_shard_range()->set_begin(init.range.lo);
  msg.mutable_shard_range()->set_end(init.range.hi);
  msg.set_chunk_elements(init.chunk_elements);
  msg.set_world_size(init.world_size);
  msg.set_apply_per_chunk(init.apply_per_chunk);
  msg.set_pull_int8_chunk(init.pull_int8_chunk);
  msg.set_replica_address(init.replica_address);
  msg.mutable_data()->set_dtype(v1::DTYPE_F32);
  bool open = true;
  auto send = [&](const std::string& name, const float* base) {
    msg.set_state_name(name);
    int64_t at = init.range.lo;
    do {
      const int64_t end = std::min(init.range.hi, at + kInitPieceFloats);
      msg.mutable_range()->set_begin(at);
      msg.mutable_range()->set_end(end);
      msg.mutable_data()->mutable_data()->assign(reinterpret_cast<const char*>(base + at),
                                                 (end - at) * sizeof(float));
      if (!w->Write(msg)) {
        open = false;  // Finish reports why
        return;
      }
      at = end;
    } while (at < init.range.hi);
  };
  send("", params);
  for (size_t i = 0; open && i < state.size(); ++i) {
    if (init.range.size() > 0) send(state[i].first, state[i].second);
  }
  w->WritesDone();
  grpc::Status s = w->Finish();
  if (!s.ok()) return FromGrpcStatus(s, absl::StrCat("ShardServer.InitShard to ", address()));
  return response.kept_optimizer_state();
}

void CallCanceller::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

bool CallCanceller::Register(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  ctx_ = ctx;
  return true;
}

void CallCanceller::Unregister() {
  absl::MutexLock lock(&mu_);
  ctx_ = nullptr;
}

namespace {

// Registers a started call with `cancel` (may be null) for its lifetime.
class CancelScope {
 public:
  CancelScope(CallCanceller* cancel, grpc::ClientContext* ctx) : cancel_(cancel) {
    if (cancel_ != nullptr && !cancel_->Register(ctx)) {
      ctx->TryCancel();
      cancel_ = nullptr;
    }
  }
  ~CancelScope() {
    if (cancel_ != nullptr) cancel_->Unregister();
  }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  CallCanceller* cancel_;
};

}  // namespace

v1::PullParametersRequest ShardClient::PullRequest(int64_t generation, int64_t step, int64_t lo,
                                                   int64_t hi, v1::DType dtype) const {
  v1::PullParametersRequest req;
  req.mutable_job()->set_job_id(options_.job_id);
  req.set_generation(generation);
  req.set_step(step);
  req.mutable_range()->set_begin(lo);
  req.mutable_range()->set_end(hi);
  req.set_dtype(dtype);
  req.set_timeout_ms(absl::ToInt64Milliseconds(options_.timeout));
  return req;
}

absl::Status ShardClient::Pull(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                               float* params, const std::string& state_name,
                               bool reset_delta_reference, CallCanceller* cancel) {
  v1::PullParametersRequest req = PullRequest(generation, step, lo, hi, v1::DTYPE_F32);
  req.set_state_name(state_name);
  req.set_reset_delta_reference(reset_delta_reference);
  return ReadFloats(req, params, cancel);
}

absl::Status ShardClient::ReadRecovery(v1::RecoverySource source, int64_t step, int64_t lo,
                                       int64_t hi, const std::string& state_name, float* out) {
  v1::PullParametersRequest req = PullRequest(0, step, lo, hi, v1::DTYPE_F32);
  req.set_state_name(state_name);
  req.set_recovery(source);
  return ReadFloats(req, out, nullptr);
}

absl::Status ShardClient::ReadPieces(
    const v1::PullParametersRequest& req, CallCanceller* cancel,
    const std::function<absl::Status(const v1::ParameterChunk&, const ChunkView&)>& take) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  // A recovery read of a server that is down goes to the replica at once.
  if (req.recovery() != v1::RECOVERY_NONE) ctx.set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> r(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), *pull_method_,
                                                                     &ctx, req));
  CancelScope scope(cancel, &ctx);
  grpc::ByteBuffer buffer;
  ChunkView piece;
  v1::ParameterChunk fields;
  absl::Status bad;
  while (r->Read(&buffer)) {
    if (!bad.ok()) continue;
    bad = piece.Decode(buffer, kParameterChunkData, &fields);
    if (bad.ok()) bad = take(fields, piece);
    if (!bad.ok()) {
      bad = absl::Status(bad.code(), absl::StrCat("pull from ", address(), ": ", bad.message()));
      ctx.TryCancel();
    }
  }
  grpc::Status s = r->Finish();
  if (!bad.ok()) return bad;
  if (!s.ok()) return FromGrpcStatus(s, absl::StrCat("ShardServer.PullParameters to ", address()));
  return absl::OkStatus();
}

absl::Status ShardClient::ReadFloats(const v1::PullParametersRequest& req, float* params,
                                     CallCanceller* cancel) {
  const int64_t lo = req.range().begin(), hi = req.range().end(), step = req.step();
  int64_t got = 0;
  RETURN_IF_ERROR(ReadPieces(req, cancel, [&](const v1::ParameterChunk& m, const ChunkView& p) {
    const int64_t a = m.range().begin(), b = m.range().end();
    if (a < lo || b > hi || a > b || m.step() != step || p.payload_bytes() != (b - a) * 4) {
      return absl::DataLossError(absl::StrCat("a chunk of ", p.payload_bytes(), " bytes for [", a,
                                              ", ", b, ") of step ", m.step(),
                                              " does not fit the request for [", lo, ", ", hi,
                                              ") of step ", step));
    }
    got += b - a;
    return p.CopyPayload(params + a, (b - a) * int64_t{sizeof(float)});
  }));
  if (got != hi - lo) {
    return absl::DataLossError(absl::StrCat("pull from ", address(), ": got ", got, " of ",
                                            hi - lo, " parameters for [", lo, ", ", hi, ")"));
  }
  return absl::OkStatus();
}

absl::Status ShardClient::PullDelta(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                                    uint8_t* block, int64_t bytes, CallCanceller* cancel) {
  const v1::PullParametersRequest req = PullRequest(generation, step, lo, hi, v1::DTYPE_I8);
  int64_t got = 0;
  RETURN_IF_ERROR(ReadPieces(req, cancel, [&](const v1::ParameterChunk& m, const ChunkView& p) {
    const int64_t at = m.block_offset(), n = p.payload_bytes();
    if (m.range().begin() != lo || m.range().end() != hi || m.step() != step ||
        p.dtype() != v1::DTYPE_I8 || at != got || at + n > bytes) {
      return absl::DataLossError(absl::StrCat(
          "int8: a piece of ", n, " bytes at ", at, " for [", m.range().begin(), ", ",
          m.range().end(), ") of step ", m.step(), " does not fit the request for the ", bytes, "-byte block of [",
          lo, ", ", hi, ") of step ", step));
    }
    got += n;
    return p.CopyPayload(block + at, n);
  }));
  if (got != bytes) {
    return absl::DataLossError(absl::StrCat("int8 pull from ", address(), ": got ", got, " of ",
                                            bytes, " bytes of the delta of [", lo, ", ", hi, ")"));
  }
  return absl::OkStatus();
}

}  // namespace shard
}  // namespace tandem
