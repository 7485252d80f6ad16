#include "common/shard/chunk_wire.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace shard {
namespace {

std::string Bytes(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A buffer holding `bytes` cut into slices at `cuts` (ascending offsets).
grpc::ByteBuffer Sliced(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t c : cuts) {
    slices.emplace_back(bytes.data() + at, c - at);
    at = c;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

v1::GradientChunk Fields(v1::DType dtype) {
  v1::GradientChunk f;
  f.mutable_job()->set_job_id("job-7");
  f.set_generation(3);
  f.set_step(41);
  f.set_rank(2);
  f.set_weight(2);
  f.set_learning_rate(0.125);
  f.set_grad_scale(0.5);
  if (dtype == v1::DTYPE_I8) f.set_int8_chunk(256);
  f.mutable_data()->set_dtype(dtype);
  return f;
}

TEST(GradientEncoder, BytesEqualProtobufsOwnSerialization) {
  for (v1::DType dtype : {v1::DTYPE_F32, v1::DTYPE_I8, v1::DTYPE_UNSPECIFIED}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{262144}}) {
      std::string payload(n, '\0');
      for (size_t i = 0; i < n; ++i) payload[i] = static_cast<char>(i * 131 + 7);
      GradientEncoder enc;
      enc.SetFields(Fields(dtype));
      grpc::ByteBuffer b;
      enc.Encode(1000, 1000 + static_cast<int64_t>(n), grpc::Slice(payload), &b);
      v1::GradientChunk want = Fields(dtype);
      want.mutable_range()->set_begin(1000);
      want.mutable_range()->set_end(1000 + static_cast<int64_t>(n));
      want.mutable_data()->set_data(payload);
      EXPECT_EQ(Bytes(b), want.SerializeAsString()) << "dtype " << dtype << " n " << n;
    }
  }
}

TEST(GradientEncoder, ReusedAcrossChunksAndStreams) {
  GradientEncoder enc;
  enc.SetFields(Fields(v1::DTYPE_F32));
  const float a[3] = {1, 2, 3};
  grpc::ByteBuffer b;
  enc.Encode(0, 3, grpc::Slice(a, sizeof(a)), &b);
  enc.SetFields(Fields(v1::DTYPE_I8));
  const char codes[4] = {1, 2, 3, 4};
  enc.Encode(8, 12, grpc::Slice(codes, sizeof(codes)), &b);
  v1::GradientChunk got;
  ASSERT_TRUE(got.ParseFromString(Bytes(b)));
  EXPECT_EQ(got.range().begin(), 8);
  EXPECT_EQ(got.data().dtype(), v1::DTYPE_I8);
  EXPECT_EQ(got.data().data(), std::string(codes, 4));
  EXPECT_EQ(got.int8_chunk(), 256);
  EXPECT_EQ(got.job().job_id(), "job-7");
}

TEST(ParameterEncoder, BytesEqualProtobufsOwnSerialization) {
  for (const std::string state : {"", "exp_avg"}) {
    for (int64_t offset : {0, 300}) {
      std::string payload(400, '\0');
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 3);
      ParameterEncoder enc;
      enc.SetFields("job-7", 9, state, v1::DTYPE_F32);
      grpc::ByteBuffer b;
      enc.Encode(64, 164, offset, grpc::Slice(payload), &b);
      v1::ParameterChunk want;
      want.mutable_job()->set_job_id("job-7");
      want.set_step(9);
      want.mutable_range()->set_begin(64);
      want.mutable_range()->set_end(164);
      want.mutable_data()->set_dtype(v1::DTYPE_F32);
      want.mutable_data()->set_data(payload);
      want.set_state_name(state);
      want.set_block_offset(offset);
      EXPECT_EQ(Bytes(b), want.SerializeAsString()) << state << " " << offset;
      ChunkView v;
      v1::ParameterChunk fields;
      ASSERT_TRUE(v.Decode(b, kParameterChunkData, &fields).ok());
      EXPECT_EQ(fields.block_offset(), offset);
      EXPECT_EQ(fields.state_name(), state);
      EXPECT_EQ(v.payload_bytes(), 400);
    }
  }
}

v1::ParameterChunk Answer(int64_t lo, int64_t hi) {
  v1::ParameterChunk m;
  m.mutable_job()->set_job_id("job-7");
  m.set_step(12);
  m.mutable_range()->set_begin(lo);
  m.mutable_range()->set_end(hi);
  m.mutable_data()->set_dtype(v1::DTYPE_F32);
  m.mutable_data()->add_shape(hi - lo);  // skipped by the decoder
  std::string data((hi - lo) * 4, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  m.mutable_data()->set_data(data);
  m.set_state_name("exp_avg");  // an unread field after the payload
  m.set_block_offset(5);
  m.mutable_optimizer()->set_name("sgd");
  return m;
}

TEST(ChunkView, DecodesWhereverTheSlicesAreCut) {
  const v1::ParameterChunk m = Answer(100, 110);
  const std::string bytes = m.SerializeAsString();
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    for (size_t cut2 : {cut, std::min(bytes.size(), cut + 3), bytes.size()}) {
      ChunkView v;
      v1::ParameterChunk f;
      ASSERT_TRUE(v.Decode(Sliced(bytes, {cut, cut2}), kParameterChunkData, &f).ok()) << cut;
      EXPECT_EQ(f.step(), 12);
      EXPECT_EQ(f.range().begin(), 100);
      EXPECT_EQ(f.range().end(), 110);
      EXPECT_EQ(v.dtype(), v1::DTYPE_F32);
      EXPECT_EQ(f.block_offset(), 5);
      EXPECT_EQ(f.state_name(), "exp_avg");
      EXPECT_EQ(f.optimizer().name(), "sgd");
      EXPECT_FALSE(f.has_data());
      ASSERT_EQ(v.payload_bytes(), 40);
      std::string out(40, 'x');
      ASSERT_TRUE(v.CopyPayload(out.data(), 40).ok());
      EXPECT_EQ(out, m.data().data()) << "cut at " << cut << ", " << cut2;
    }
  }
}

TEST(ChunkView, ReadsAnEncodedPushAndAnEmptyPayload) {
  v1::ParameterChunk m;
  m.set_step(3);
  m.mutable_range()->set_begin(7);
  m.mutable_range()->set_end(7);
  m.mutable_data()->set_dtype(v1::DTYPE_F32);
  ChunkView v;
  v1::ParameterChunk f;
  ASSERT_TRUE(v.Decode(Sliced(m.SerializeAsString(), {}), kParameterChunkData, &f).ok());
  EXPECT_EQ(f.range().begin(), 7);
  EXPECT_EQ(v.payload_bytes(), 0);
  EXPECT_TRUE(v.CopyPayload(nullptr, 0).ok());
  EXPECT_EQ(v.CopyPayload(nullptr, 4).code(), absl::StatusCode::kDataLoss);
}

TEST(ChunkView, RefusesEveryTruncation) {
  const v1::ParameterChunk m = Answer(0, 16);
  const std::string bytes = m.SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    ChunkView v;
    v1::ParameterChunk f;
    absl::Status s = v.Decode(Sliced(bytes.substr(0, n), {n / 2}), kParameterChunkData, &f);
    std::string out(64, '\0');
    // A prefix that ends between fields parses; it then lacks the payload
    // (or the fields after it, which a pull checks: step and range come first).
    if (s.ok()) s = v.CopyPayload(out.data(), 64);
    if (s.ok()) {
      EXPECT_LT(n, bytes.size());
      EXPECT_GE(n, bytes.size() - m.ByteSizeLong() + 64);  // payload complete
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << n;
  }
}

TEST(ChunkView, RefusesGarbledBytesWithAClearError) {
  ChunkView v;
  v1::ParameterChunk f;
  // Field 2 with wire type 7 (none such).
  absl::Status s = v.Decode(Sliced(std::string("\x17\x01", 2), {}), kParameterChunkData, &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("garbled"), std::string::npos) << s;
  // A payload whose length runs past its tensor.
  s = v.Decode(Sliced(std::string("\x22\x03\x1a\x7f\x00", 5), {2}), kParameterChunkData, &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("payload"), std::string::npos) << s;
  // A varint that never ends.
  s = v.Decode(Sliced(std::string(12, '\xff'), {}), kParameterChunkData, &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
}

// The shard server's side: a push as the encoder sends it, cut anywhere,
// decodes to the same fields and payload.
TEST(ChunkView, DecodesAPushWhereverCut) {
  std::string payload(4 * 50, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 5 + 3);
  GradientEncoder enc;
  enc.SetFields(Fields(v1::DTYPE_F32));
  grpc::ByteBuffer b;
  enc.Encode(200, 250, grpc::Slice(payload), &b);
  const std::string bytes = Bytes(b);
  for (size_t cut = 0; cut <= bytes.size(); cut += 7) {
    ChunkView v;
    v1::GradientChunk f;
    ASSERT_TRUE(v.Decode(Sliced(bytes, {cut}), kGradientChunkData, &f).ok()) << cut;
    EXPECT_EQ(f.job().job_id(), "job-7");
    EXPECT_EQ(f.step(), 41);
    EXPECT_EQ(f.range().end(), 250);
    EXPECT_EQ(f.rank(), 2);
    EXPECT_EQ(f.learning_rate(), 0.125);
    EXPECT_EQ(f.grad_scale(), 0.5);
    EXPECT_EQ(v.dtype(), v1::DTYPE_F32);
    std::string out(payload.size(), '\0');
    ASSERT_TRUE(v.CopyPayload(out.data(), out.size()).ok());
    EXPECT_EQ(out, payload);
    // In one piece only when the cut missed the payload.
    const size_t at = bytes.find(payload);
    const bool whole = cut <= at || cut >= at + payload.size();
    if (!whole) EXPECT_EQ(v.Contiguous(1), nullptr) << cut;
    if (whole) {
      ASSERT_NE(v.Contiguous(1), nullptr) << cut;
      EXPECT_EQ(std::memcmp(v.Contiguous(1), payload.data(), payload.size()), 0);
    }
  }
}

}  // namespace
}  // namespace shard
}  // namespace tandem
