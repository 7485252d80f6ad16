// ShardClient: one worker's connection to one shard server
// (tandem.v1.ShardServer): InitShard, pulls of chunk ranges straight into
// the flat parameter vector, and push streams of gradient chunks.
//
//   ASSIGN_OR_RETURN(auto c, ShardClient::Create({"127.0.0.1:7200", "job", absl::Seconds(60)}));
//   RETURN_IF_ERROR(c->Init(init, params).status());          // rank 0, once per generation
//   PushStream& s = c->push_stream();                          // reused every step
//   RETURN_IF_ERROR(s.Open(header));
//   RETURN_IF_ERROR(s.Write(chunk, grads + chunk.lo));
//   ASSIGN_OR_RETURN(v1::PushGradientsResponse r, s.Finish());
//   RETURN_IF_ERROR(c->Pull(generation, step, lo, hi, params));
//
// Chunk payloads travel without protobuf's copies (chunk_wire.h): a push
// hands gRPC a slice over the caller's memory, a pull copies each answer's
// payload once, from the received slices straight into the flat vector. A
// push's data must therefore stay alive and unchanged until its stream's
// Finish (or Cancel) returns, which waits until gRPC has let go of every
// payload slice. Thread-safety: Init / Pull / Info may be called from several
// threads; one PushStream from one thread at a time (make several for
// several streams in flight). Errors are the server's status with the call
// and address named (FromGrpcStatus); DEADLINE_EXCEEDED after `timeout`.
#ifndef TANDEM_COMMON_SHARD_SHARD_CLIENT_H_
#define TANDEM_COMMON_SHARD_SHARD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/shard/chunk_wire.h"
#include "common/shard/shard_layout.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/client_context.h"
#include "proto/shardserver.grpc.pb.h"

namespace tandem {
namespace shard {

struct ShardClientOptions {
  std::string address;  // host:port
  std::string job_id;
  absl::Duration timeout = absl::Seconds(60);  // per RPC (pushes: per stream)
  // A fixed HTTP/2 receive window per stream for what the servers send
  // (pull answers; common/rpc/channel.h), 0 = gRPC's auto-tuned one. Keep
  // it 0: each window update of a pull crosses this node's link, which is
  // queued up with pushes, so a small fixed window starves pulls. (The
  // servers fix theirs small instead: shard_server.h.)
  int flow_window_bytes = 0;
};

// What InitShard tells a server.
struct ShardInit {
  int64_t generation = 0;
  int64_t step = 0;  // last applied step
  optim::ParamRange range;
  int64_t chunk_elements = 0;
  int world_size = 0;
  v1::OptimizerConfig optimizer;
  bool apply_per_chunk = false;  // see range_store.h
  int pull_int8_chunk = 0;       // > 0: int8 delta pulls (range_store.h)
  std::string replica_address;   // the server keeping a replica ("" = none)
};

// The fields every push of one step shares.
struct PushHeader {
  int64_t generation = 0;
  int64_t step = 0;
  int rank = 0;
  int weight = 1;
  double learning_rate = 0;
  double grad_scale = 1;
  // 0: pushes carry fp32. > 0: each push's data is an int8 codec block
  // with one scale per int8_chunk values (Int8BlockBytes).
  int int8_chunk = 0;
};

// Bytes of the int8 codec's block for n values at `chunk` values per scale
// (common/codec/int8_codec.h): ceil(n / chunk) fp32 scales, then n codes.
inline int64_t Int8BlockBytes(int64_t n, int64_t chunk) {
  return n <= 0 ? 0 : (n + chunk - 1) / chunk * 4 + n;
}

// Payload bytes of a push of n values under `header`.
inline int64_t PushPayloadBytes(const PushHeader& header, int64_t n) {
  return header.int8_chunk > 0 ? Int8BlockBytes(n, header.int8_chunk)
                               : n * static_cast<int64_t>(sizeof(float));
}

class PushStream {
 public:
  // `method`: ShardServer.PushGradients on `channel` (both outlive this).
  PushStream(grpc::ChannelInterface* channel, const grpc::internal::RpcMethod* method,
             const ShardClientOptions* options);
  ~PushStream();
  // Starts a PushGradients stream (FailedPrecondition when one is open).
  absl::Status Open(const PushHeader& header);
  // Sends chunk [c.lo, c.hi): c.size() floats from `data`, or with the
  // header's int8_chunk > 0 the int8 block of Int8BlockBytes(c.size())
  // bytes. `data` is referenced, not copied: keep it until Finish / Cancel.
  absl::Status Write(const Chunk& c, const void* data);
  // Ends the stream and returns the server's answer (or its refusal).
  absl::StatusOr<v1::PushGradientsResponse> Finish();
  // Abandons an open stream (after an error elsewhere).
  void Cancel();
  bool open() const { return writer_ != nullptr; }

 private:
  // gRPC let go of a payload slice (its destroy callback; any thread).
  static void Released(void* self);
  // After the call is gone: until gRPC has released every payload slice.
  void AwaitReleased();

  grpc::ChannelInterface* const channel_;
  const grpc::internal::RpcMethod* const method_;
  const ShardClientOptions* const options_;
  PushHeader header_;      // of the open stream
  GradientEncoder encoder_;
  grpc::ByteBuffer buffer_;  // the message being written (reused)
  v1::PushGradientsResponse response_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer_;
  absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;  // payload slices gRPC still holds
};

// Lets another thread end a blocking call (a pull waiting for its step):
// the call registers its context while it runs; Cancel() cancels it and
// makes every later call through this canceller fail with CANCELLED at
// once. Thread-safe; must outlive the calls that use it.
class CallCanceller {
 public:
  void Cancel();
  // For the call (ShardClient), after it has started. False: cancelled
  // already (the caller cancels its own context).
  bool Register(grpc::ClientContext* ctx);
  void Unregister();

 private:
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class ShardClient {
 public:
  static absl::StatusOr<std::unique_ptr<ShardClient>> Create(const ShardClientOptions& options);

  const std::string& address() const { return options_.address; }
  absl::StatusOr<v1::ShardInfo> Info();
  // SaveShard: the server writes its range as a checkpoint shard file
  // (request.job is filled in).
  absl::StatusOr<v1::SaveShardResponse> Save(v1::SaveShardRequest request);
  // Sends params[init.range] (params is the flat vector's base) in pieces of
  // about 4 MiB, and each named optimizer state buffer's init.range (bases
  // of flat vectors, e.g. a restored checkpoint's); returns whether the
  // server kept its own optimizer state.
  absl::StatusOr<bool> Init(const ShardInit& init, const float* params,
                            const std::vector<std::pair<std::string, const float*>>& state = {});
  // Pulls params[lo, hi) as of `step` into params (the flat vector's base),
  // waiting up to the timeout for the step to be applied. With state_name:
  // that optimizer state buffer instead. reset_delta_reference: the
  // server's int8 deltas of [lo, hi) are taken from these values from now
  // on (the caller will hold them).
  // `cancel` (may be null) lets another thread end the wait.
  absl::Status Pull(int64_t generation, int64_t step, int64_t lo, int64_t hi, float* params,
                    const std::string& state_name = "", bool reset_delta_reference = false,
                    CallCanceller* cancel = nullptr);
  // The int8 block (Int8BlockBytes(hi - lo, pull_int8_chunk) = `bytes`) of
  // chunk [lo, hi)'s delta for `step` into block[0, bytes), waiting as Pull
  // does; the caller decodes it and adds it to the parameters it holds.
  absl::Status PullDelta(int64_t generation, int64_t step, int64_t lo, int64_t hi, uint8_t* block,
                         int64_t bytes, CallCanceller* cancel = nullptr);
  // Recovery read (shardserver.proto's `recovery`): `state_name` ("" =
  // parameters) over [lo, hi) as of `step` from the server's own kept
  // versions (RECOVERY_OWN) or the replica it holds of its neighbour
  // (RECOVERY_REPLICA) into out (the flat vector's base). Answered at once:
  // FAILED_PRECONDITION when the server holds no version at `step`.
  absl::Status ReadRecovery(v1::RecoverySource source, int64_t step, int64_t lo, int64_t hi,
                            const std::string& state_name, float* out);
  // A new stream over this client's channel (owned by the caller).
  std::unique_ptr<PushStream> NewPushStream();

 private:
  explicit ShardClient(const ShardClientOptions& options);
  // The fields Pull and PullDelta share (job, generation, step, range,
  // dtype, the server-side wait).
  v1::PullParametersRequest PullRequest(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                                        v1::DType dtype) const;
  // A PullParameters call whose answers go to `take` one by one (their
  // fields, and the payload still in the received slices: chunk_wire.h); the first error (a garbled answer, `take`'s)
  // cancels the call and is returned, with this server named.
  absl::Status ReadPieces(const v1::PullParametersRequest& req, CallCanceller* cancel,
                          const std::function<absl::Status(const v1::ParameterChunk&,
                                                           const ChunkView&)>& take);
  // A fp32 PullParameters stream into params (the flat vector's base).
  absl::Status ReadFloats(const v1::PullParametersRequest& req, float* params,
                          CallCanceller* cancel);
  const ShardClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ShardServer::Stub> stub_;
  // PushGradients and PullParameters with raw ByteBuffer messages.
  std::unique_ptr<grpc::internal::RpcMethod> push_method_, pull_method_;
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_SHARD_CLIENT_H_
