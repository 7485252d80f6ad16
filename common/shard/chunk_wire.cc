#include "common/shard/chunk_wire.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace shard {
namespace {

// Protobuf wire types, and the Tensor's field numbers (generated).
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr int kTensorDtype = v1::Tensor::kDtypeFieldNumber;
constexpr int kTensorData = v1::Tensor::kDataFieldNumber;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

int VarintSize(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

char Tag(int field, int wire_type) { return static_cast<char>(field << 3 | wire_type); }

// Reads a message's bytes across the slices of a received buffer.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& s) : s_(s) {}
  size_t pos() const { return pos_; }
  size_t slice() const { return i_; }
  size_t offset() const { return off_; }
  bool Byte(uint8_t* b) {
    Settle();
    if (i_ == s_.size()) return false;
    *b = s_[i_].begin()[off_++];
    ++pos_;
    return true;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  bool Skip(uint64_t n) { return Append(n, nullptr); }
  // The next n bytes appended to *out (null: skipped).
  bool Append(uint64_t n, std::string* out) {
    while (n > 0) {
      Settle();
      if (i_ == s_.size()) return false;
      const size_t take = std::min<uint64_t>(n, s_[i_].size() - off_);
      if (out != nullptr) out->append(reinterpret_cast<const char*>(s_[i_].begin()) + off_, take);
      off_ += take;
      pos_ += take;
      n -= take;
    }
    return true;
  }
  // Moves past exhausted slices, so slice()/offset() name the next byte.
  void Settle() {
    while (i_ < s_.size() && off_ == s_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }

 private:
  const std::vector<grpc::Slice>& s_;
  size_t i_ = 0, off_ = 0, pos_ = 0;
};

absl::Status Garbled(const Cursor& c, size_t total, const std::string& what) {
  return absl::DataLossError(absl::StrCat("shard chunk message of ", total, " bytes: ", what,
                                          " at byte ", c.pos(),
                                          " (a truncated or garbled answer)"));
}

// Reads one field's value of `wire_type`, appending it as encoded to *out
// (null: skipped). False when cut short or of a type these messages lack.
bool CopyValue(Cursor& c, int wire_type, std::string* out) {
  uint64_t v;
  switch (wire_type) {
    case kVarint:
      if (!c.Varint(&v)) return false;
      if (out != nullptr) AppendVarint(v, out);
      return true;
    case kFixed64:
      return c.Append(8, out);
    case kLengthDelimited:
      if (!c.Varint(&v)) return false;
      if (out != nullptr) AppendVarint(v, out);
      return c.Append(v, out);
    case kFixed32:
      return c.Append(4, out);
    default:
      return false;  // groups (3, 4) and unknown types are not in these messages
  }
}

}  // namespace

void GradientEncoder::SetFields(const v1::GradientChunk& f) {
  head_.Clear();
  *head_.mutable_job() = f.job();
  head_.set_worker_id(f.worker_id());
  head_.set_step(f.step());
  head_.set_generation(f.generation());
  head_.mutable_range();  // present in every push, set per Encode
  v1::GradientChunk tail;
  tail.set_weight(f.weight());
  tail.set_learning_rate(f.learning_rate());
  tail.set_rank(f.rank());
  tail.set_grad_scale(f.grad_scale());
  tail.set_int8_chunk(f.int8_chunk());
  tail_.clear();
  tail.AppendToString(&tail_);
  dtype_ = f.data().dtype();
}

void AssembleChunk(const std::string& head, int field, int dtype, const grpc::Slice& payload,
                   const std::string& tail, std::string* scratch, grpc::ByteBuffer* out) {
  *scratch = head;
  // The Tensor as protobuf writes it: dtype, then data's length prefix;
  // the payload follows as its own slice.
  const uint64_t n = payload.size();
  const uint64_t body = (dtype != 0 ? 1 + VarintSize(dtype) : 0) +
                        (n > 0 ? 1 + VarintSize(n) + n : 0);
  scratch->push_back(Tag(field, kLengthDelimited));
  AppendVarint(body, scratch);
  if (dtype != 0) {
    scratch->push_back(Tag(kTensorDtype, kVarint));
    AppendVarint(dtype, scratch);
  }
  if (n > 0) {
    scratch->push_back(Tag(kTensorData, kLengthDelimited));
    AppendVarint(n, scratch);
  }
  grpc::Slice slices[3] = {grpc::Slice(*scratch), grpc::Slice(), grpc::Slice()};
  size_t count = 1;
  if (n > 0) slices[count++] = payload;
  if (!tail.empty()) slices[count++] = grpc::Slice(tail);
  *out = grpc::ByteBuffer(slices, count);
}

void GradientEncoder::Encode(int64_t lo, int64_t hi, const grpc::Slice& payload,
                             grpc::ByteBuffer* out) {
  head_.mutable_range()->set_begin(lo);
  head_.mutable_range()->set_end(hi);
  head_bytes_.clear();
  head_.AppendToString(&head_bytes_);
  AssembleChunk(head_bytes_, kGradientChunkData, dtype_, payload, tail_, &scratch_, out);
}

void ParameterEncoder::SetFields(const std::string& job_id, int64_t step,
                                 const std::string& state_name, int dtype) {
  head_.Clear();
  head_.mutable_job()->set_job_id(job_id);
  head_.set_step(step);
  head_.mutable_range();
  tail_.Clear();
  tail_.set_state_name(state_name);
  dtype_ = dtype;
}

void ParameterEncoder::Encode(int64_t lo, int64_t hi, int64_t block_offset,
                              const grpc::Slice& payload, grpc::ByteBuffer* out) {
  head_.mutable_range()->set_begin(lo);
  head_.mutable_range()->set_end(hi);
  head_bytes_.clear();
  head_.AppendToString(&head_bytes_);
  tail_.set_block_offset(block_offset);
  tail_bytes_.clear();
  tail_.AppendToString(&tail_bytes_);
  AssembleChunk(head_bytes_, kParameterChunkData, dtype_, payload, tail_bytes_, &scratch_, out);
}

absl::Status ChunkView::Decode(const grpc::ByteBuffer& buffer, int data_field,
                               google::protobuf::MessageLite* fields) {
  dtype_ = 0;
  payload_slice_ = payload_offset_ = 0;
  payload_size_ = 0;
  others_.clear();
  if (!buffer.Dump(&slices_).ok()) return absl::DataLossError("shard chunk message: unreadable");
  const size_t total = buffer.Length();
  Cursor c(slices_);
  while (c.pos() < total) {
    uint64_t tag, v;
    if (!c.Varint(&tag)) return Garbled(c, total, "a field tag cut short");
    const int field = static_cast<int>(tag >> 3), type = static_cast<int>(tag & 7);
    if (field != data_field || type != kLengthDelimited) {
      AppendVarint(tag, &others_);
      if (!CopyValue(c, type, &others_)) {
        return Garbled(c, total, absl::StrCat("field ", field, " of wire type ", type));
      }
      continue;
    }
    uint64_t len;
    if (!c.Varint(&len) || len > total - c.pos()) {
      return Garbled(c, total, absl::StrCat("field ", field, "'s length past the end"));
    }
    const size_t end = c.pos() + len;
    while (c.pos() < end) {  // the Tensor
      if (!c.Varint(&tag)) return Garbled(c, total, "a field tag cut short");
      const int f = static_cast<int>(tag >> 3), t = static_cast<int>(tag & 7);
      if (f == kTensorData && t == kLengthDelimited) {
        if (!c.Varint(&len) || len > end - c.pos()) {
          return Garbled(c, total, "the payload's length past the end of its tensor");
        }
        c.Settle();
        payload_slice_ = c.slice();
        payload_offset_ = c.offset();
        payload_size_ = static_cast<int64_t>(len);
        c.Skip(len);
      } else if (f == kTensorDtype && t == kVarint) {
        if (!c.Varint(&v)) return Garbled(c, total, "a number cut short");
        dtype_ = static_cast<int>(v);
      } else if (!CopyValue(c, t, nullptr)) {
        return Garbled(c, total, absl::StrCat("field ", field, ".", f, " of wire type ", t));
      }
    }
    if (c.pos() != end) return Garbled(c, total, absl::StrCat("field ", field, " overran"));
  }
  if (!fields->ParseFromString(others_)) {
    return absl::DataLossError(absl::StrCat("shard chunk message of ", total,
                                            " bytes: its fields do not parse as ",
                                            fields->GetTypeName()));
  }
  return absl::OkStatus();
}

const void* ChunkView::Contiguous(size_t align) const {
  if (payload_size_ == 0 || payload_slice_ >= slices_.size()) return nullptr;
  const grpc::Slice& s = slices_[payload_slice_];
  const uint8_t* p = s.begin() + payload_offset_;
  if (s.size() - payload_offset_ < static_cast<size_t>(payload_size_)) return nullptr;
  return reinterpret_cast<uintptr_t>(p) % align == 0 ? p : nullptr;
}

absl::Status ChunkView::CopyPayload(void* dst, int64_t bytes) const {
  if (bytes != payload_size_) {
    return absl::DataLossError(absl::StrCat("shard chunk message: a payload of ", payload_size_,
                                            " bytes where ", bytes, " were expected"));
  }
  char* out = static_cast<char*>(dst);
  size_t i = payload_slice_, off = payload_offset_;
  for (int64_t left = bytes; left > 0; ++i, off = 0) {
    const size_t take = std::min<int64_t>(left, slices_[i].size() - off);
    std::memcpy(out, slices_[i].begin() + off, take);
    out += take;
    left -= take;
  }
  return absl::OkStatus();
}

}  // namespace shard
}  // namespace tandem
