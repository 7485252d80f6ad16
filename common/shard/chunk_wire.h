// The shard server's chunk messages on the wire without protobuf's copies
// of their payload (issue 33: the CPU a ps / hybrid chunk costs).
//
// A push (GradientChunk) is sent as a grpc::ByteBuffer of three slices: the
// fields before `data`, the Tensor's own fields with the payload's length
// prefix, and the payload itself, a slice over the caller's memory (no
// copy); the bytes are exactly GradientChunk::SerializeAsString of the same
// message (fields in number order), so the server parses it unchanged. A
// pull answer (ParameterChunk) is read from the received ByteBuffer's
// slices: the few fields a pull checks are decoded in place and the payload
// is copied once, straight to where it belongs.
//
//   GradientEncoder enc;                       // one per stream, reused
//   enc.SetFields(header);                     // once per stream (data empty)
//   grpc::ByteBuffer b;
//   enc.Encode(range_lo, range_hi, payload_slice, &b);
//
//   ChunkView v;                               // one per reader, reused
//   RETURN_IF_ERROR(v.Decode(buffer));         // DataLoss: garbled or short
//   RETURN_IF_ERROR(v.CopyPayload(dst, v.payload_bytes()));
//
// ParameterEncoder does for a pull's answers what GradientEncoder does for
// pushes (the shard server's side). Not thread-safe (one object per stream). Encode allocates one small slice
// for the fields (gRPC's own size class); Decode keeps its slice list.
#ifndef TANDEM_COMMON_SHARD_CHUNK_WIRE_H_
#define TANDEM_COMMON_SHARD_CHUNK_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/shardserver.pb.h"

namespace tandem {
namespace shard {

// The bytes of a message whose fields below `field` are `head` (serialized),
// field `field` a Tensor {dtype, data = payload}, and fields above it
// `tail`: exactly what protobuf writes for that message, the payload as its
// own slice (referenced). scratch: reused for head + the Tensor's prefix.
void AssembleChunk(const std::string& head, int field, int dtype, const grpc::Slice& payload,
                   const std::string& tail, std::string* scratch, grpc::ByteBuffer* out);

class GradientEncoder {
 public:
  // Every field of the stream's pushes but range and data.data (which must
  // be empty): job, step, generation, weight, rank, scalars, data.dtype.
  void SetFields(const v1::GradientChunk& fields);
  // The message for elements [lo, hi) with `payload` as data.data into *out
  // (replacing its contents); the payload slice is referenced, not copied.
  void Encode(int64_t lo, int64_t hi, const grpc::Slice& payload, grpc::ByteBuffer* out);

 private:
  v1::GradientChunk head_;  // fields 1-5 (range set per Encode)
  std::string tail_;        // fields 7-11, serialized once per SetFields
  int dtype_ = 0;
  std::string head_bytes_, scratch_;  // reused
};

// The same for a pull's answers (ParameterChunk: job, step, range, data,
// and after it state_name and block_offset; the InitShard-only fields
// unset), as the shard server sends them.
class ParameterEncoder {
 public:
  void SetFields(const std::string& job_id, int64_t step, const std::string& state_name,
                 int dtype);
  void Encode(int64_t lo, int64_t hi, int64_t block_offset, const grpc::Slice& payload,
              grpc::ByteBuffer* out);

 private:
  v1::ParameterChunk head_, tail_;
  int dtype_ = 0;
  std::string head_bytes_, tail_bytes_, scratch_;
};

// One decoded ParameterChunk whose payload still lies in the received
// buffer's slices.
class ChunkView {
 public:
  // Decodes the top-level fields a pull reads (step, range, data.dtype,
  // data.data's place and size, block_offset); others are skipped. A
  // truncated or malformed message is DATA_LOSS naming what is wrong.
  absl::Status Decode(const grpc::ByteBuffer& buffer);

  int64_t step() const { return step_; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int dtype() const { return dtype_; }
  int64_t block_offset() const { return block_offset_; }
  int64_t payload_bytes() const { return payload_size_; }
  // Copies the payload (exactly `bytes`, its size) to dst.
  absl::Status CopyPayload(void* dst, int64_t bytes) const;

 private:
  std::vector<grpc::Slice> slices_;
  int64_t step_ = 0, begin_ = 0, end_ = 0, block_offset_ = 0;
  int dtype_ = 0;
  size_t payload_slice_ = 0, payload_offset_ = 0;  // where data.data starts
  int64_t payload_size_ = 0;
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_CHUNK_WIRE_H_
