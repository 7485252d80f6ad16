// The tandem.v1.ShardServer gRPC service: a thin handler over RangeStore.
// Each RPC turns its messages into store calls and the store's Status into
// the call's status (ToGrpcStatus, common/rpc/grpc_status.h, the one
// conversion). Payloads are fp32 (Tensor dtype F32); pulls are streamed in
// pieces of chunk_bytes (the request's, default 4 MiB). PushGradients and
// PullParameters run as raw handlers over the same wire bytes, so chunk
// payloads skip protobuf's copies (common/shard/chunk_wire.h).
//
//   RangeStore store(&metrics);
//   ShardService service(&store, &metrics);
//   ASSIGN_OR_RETURN(auto server, RpcServer::Start({}, {&service}));
//
// Thread-safe. The store and metrics are borrowed (metrics may be null).
// Errors per call: the store's (see range_store.h); INVALID_ARGUMENT for a
// payload whose dtype or byte count does not match its range (pushes: fp32,
// or with int8_chunk an int8 codec block, dequantized here and summed in
// fp32), a request for
// another job, or a bad pull size; UNIMPLEMENTED for a bf16 pull. A
// DTYPE_I8 pull (a generation with pull_int8_chunk) returns the chunk's
// int8 delta block (range_store.h) in pieces with block_offset. SaveShard
// writes this server's range (params + optimizer state) as a checkpoint
// shard file at the request's path (the server needs the checkpoint
// directory on its file system); with mode SAVE_SNAPSHOT it only copies
// the range into the server's one snapshot, and SAVE_FROM_SNAPSHOT writes
// that copy later (shard_snapshot.h). Replicate stores a primary's chunk in the
// replica store (replica_store.h; FAILED_PRECONDITION without one); a pull
// with `recovery` set reads a kept step of the server's own range
// (RangeStore::ReadKept) or of the replica it holds, without waiting. With
// range replication a push stream of step S is answered once the replica
// holds S - 1 (RangeStore::WaitReplicated; replicator.h says why).
#ifndef TANDEM_SERVICES_SHARDSERVER_SHARD_SERVICE_H_
#define TANDEM_SERVICES_SHARDSERVER_SHARD_SERVICE_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/shard/chunk_wire.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/shardserver.grpc.pb.h"
#include "services/shardserver/range_store.h"
#include "services/shardserver/replica_store.h"
#include "services/shardserver/shard_snapshot.h"
#include "services/shardserver/shard_metrics.h"

namespace tandem {
namespace shardserver {

class ShardService final : public v1::ShardServer::Service {
 public:
  // `auth_token`: every call must carry it (common/rpc/auth.h); "" = no check.
  // `replica` (may be null: Replicate is refused) holds a neighbour's range.
  ShardService(RangeStore* store, const ShardMetrics* metrics, std::string auth_token = "",
               ReplicaStore* replica = nullptr);

  grpc::Status GetShardInfo(grpc::ServerContext* context, const v1::GetShardInfoRequest* request,
                            v1::ShardInfo* response) override;
  grpc::Status InitShard(grpc::ServerContext* context,
                         grpc::ServerReader<v1::ParameterChunk>* reader,
                         v1::InitShardResponse* response) override;
  grpc::Status SaveShard(grpc::ServerContext* context, const v1::SaveShardRequest* request,
                         v1::SaveShardResponse* response) override;
  grpc::Status Replicate(grpc::ServerContext* context, const v1::ReplicaChunk* request,
                         v1::ReplicaAck* response) override;
  grpc::Status ReplicateStream(grpc::ServerContext* context,
                               grpc::ServerReader<v1::ReplicaChunk>* reader,
                               v1::ReplicaAcks* response) override;

 private:
  // PushGradients and PullParameters are served with raw messages
  // (chunk_wire.h), each as a stream of ByteBuffers (the same bytes on the
  // wire as the generated client- and server-streaming handlers): a push's
  // payload is summed straight from the received slice when it arrived in
  // one piece, else copied once (no protobuf parse); a pull's answers leave
  // as slices the store fills directly, the last with the call's status.
  using PieceStream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  grpc::Status PushGradients(grpc::ServerContext* context, PieceStream* stream);
  grpc::Status PullParameters(grpc::ServerContext* context, PieceStream* stream);
  absl::Status Init(grpc::ServerReader<v1::ParameterChunk>* reader,
                    v1::InitShardResponse* response);
  // Sums the stream's chunks; with range replication, acknowledges a push
  // of step S only once the replica holds S - 1 (RangeStore::WaitReplicated).
  absl::Status Push(grpc::ServerContext* context, PieceStream* stream,
                    v1::PushGradientsResponse* response);
  absl::Status Pull(grpc::ServerContext* context, const v1::PullParametersRequest& request,
                    PieceStream* writer);
  // A DTYPE_I8 pull: the chunk's delta block, in pieces of chunk_bytes.
  absl::Status PullDelta(const v1::PullParametersRequest& request,
                         PieceStream* writer);
  absl::Status Save(const v1::SaveShardRequest& request, v1::SaveShardResponse* response);
  // Streams r.range in pieces of r.chunk_bytes, each filled by `read`
  // (at, end, out); `count`: into tandem_shard_pull_bytes_total.
  absl::Status StreamFloats(const v1::PullParametersRequest& r, PieceStream* writer, bool count,
                            const std::function<absl::Status(int64_t, int64_t, float*)>& read);
  // A pull with `recovery` set: a kept step, streamed like a pull.
  absl::Status PullRecovery(const v1::PullParametersRequest& request,
                            PieceStream* writer);
  absl::Status CheckJob(const v1::JobRef& job) const;
  // One replication message into the replica store, acknowledged in *ack.
  absl::Status AcceptReplica(const v1::ReplicaChunk& chunk, v1::ReplicaAck* ack);

  RangeStore* const store_;
  ReplicaStore* const replica_;
  const std::string auth_token_;
  const ShardMetrics* const metrics_;
  // The one snapshot a background checkpoint captures and later writes.
  absl::Mutex snapshot_mu_;
  ShardSnapshot snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
};

// Checks an int8 push (its Tensor's dtype and payload bytes): int8_chunk
// in the codec's range, dtype I8 and exactly the block's bytes for
// (end - begin) values.
absl::Status CheckInt8Payload(int dtype, int64_t bytes, const v1::FlatRange& range,
                              int int8_chunk, const char* what);
// Checks a payload: dtype F32 and exactly (end - begin) floats.
absl::Status CheckF32Payload(int dtype, int64_t bytes, const v1::FlatRange& range,
                             const char* what);

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_SHARD_SERVICE_H_
