// The shard server's chunk messages on the wire without protobuf's copies
// of their payload (issue 33: the CPU a ps / hybrid chunk costs).
//
// A push (GradientChunk) is sent as a grpc::ByteBuffer of three slices: the
// fields before `data`, the Tensor's own fields with the payload's length
// prefix, and the payload itself, a slice over the caller's memory (no
// copy); the bytes are exactly GradientChunk::SerializeAsString of the same
// message (fields in number order), so the server parses it unchanged. A
// pull answer (ParameterChunk) is read from the received ByteBuffer's
// slices: the small fields are parsed from a copy of their few bytes and
// the payload is copied once, straight to where it belongs (the shard
// server reads pushes the same way, summing straight from the slice when
// the payload arrived in one piece).
//
//   GradientEncoder enc;                       // one per stream, reused
//   enc.SetFields(header);                     // once per stream (data empty)
//   grpc::ByteBuffer b;
//   enc.Encode(range_lo, range_hi, payload_slice, &b);
//
//   ChunkView v;                               // one per reader, reused
//   v1::ParameterChunk fields;                 // every field but data
//   RETURN_IF_ERROR(v.Decode(buffer, kParameterChunkData, &fields));
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

// One received chunk message (a ParameterChunk answer, or a GradientChunk
// push on the server) whose payload, the `data` Tensor's bytes, still lies
// in the received buffer's slices.
class ChunkView {
 public:
  // Decodes `buffer`: field `data_field` as a Tensor (its dtype and the
  // payload's place), every other field into *fields (parsed by protobuf
  // from a copy of those few bytes; its data is left unset). A truncated or
  // malformed message is DATA_LOSS naming what is wrong.
  absl::Status Decode(const grpc::ByteBuffer& buffer, int data_field,
                      google::protobuf::MessageLite* fields);

  int dtype() const { return dtype_; }
  int64_t payload_bytes() const { return payload_size_; }
  // Copies the payload (exactly `bytes`, its size) to dst.
  absl::Status CopyPayload(void* dst, int64_t bytes) const;
  // The payload where it lies when it is one piece of memory aligned for
  // `align` bytes (no copy needed), else null.
  const void* Contiguous(size_t align) const;

 private:
  std::vector<grpc::Slice> slices_;
  std::string others_;  // the fields besides data, re-encoded (reused)
  int dtype_ = 0;
  size_t payload_slice_ = 0, payload_offset_ = 0;  // where data.data starts
  int64_t payload_size_ = 0;
};

// Field numbers of the Tensor payloads, from the generated messages.
inline constexpr int kGradientChunkData = v1::GradientChunk::kDataFieldNumber;
inline constexpr int kParameterChunkData = v1::ParameterChunk::kDataFieldNumber;

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_CHUNK_WIRE_H_
