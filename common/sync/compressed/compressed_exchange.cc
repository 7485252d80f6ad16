// One bucket's exchange on the communication thread: plain allreduce
// (warm-up, small buckets), dense codecs (flat or hierarchical), sparse
// codecs; and the stochastic-rounding seeds they use.
#include "common/sync/compressed/compressed_sync_internal.h"

#include "common/numeric/mix64.h"
#include "common/trace/trace.h"

namespace tandem {
namespace sync {
using numeric::Mix64;

uint64_t CompressedSeed(int64_t step, int bucket, int rank, int slice, int stage) {
  uint64_t h = Mix64(static_cast<uint64_t>(step) + 0x9e3779b97f4a7c15ull);
  h = Mix64(h ^ (static_cast<uint64_t>(bucket) << 32 | static_cast<uint32_t>(rank)));
  return Mix64(h ^ (static_cast<uint64_t>(slice) << 8 | static_cast<uint64_t>(stage)));
}

namespace compressed_internal {

absl::Status CompressedSync::RunBucket(int b) {
  const BucketLayout& L = buckets_[b];
  constexpr int64_t kFloat = sizeof(float);
  if (!compress_now_ || !L.compress) {
    // Momentum correction: the velocity goes out whole (momentum SGD).
    if (momentum_correction_) ef_->AddMomentum(grads_ + L.lo, L.lo, L.n);
    RETURN_IF_ERROR(comm_->AllReduce(grads_ + L.lo, L.n, ReduceOp::kSum));
    stats_.Sent(L.n * kFloat);
    stats_.Uncompressed();
    return absl::OkStatus();
  }
  return sparse_ ? RunSparse(b, L) : RunDense(b, L);
}

absl::Status CompressedSync::RunDense(int b, const BucketLayout& L) {
  const int W = ex_size_;
  if (hier_) {
    RETURN_IF_ERROR(ReduceShare(b, L));
    // A share every local rank of this index lacks (a bucket smaller than
    // the node): nothing to exchange, on every member of the inter group.
    if (L.x_n == 0) return GatherShares(b, L);
  }
  float* g = hier_ ? shares_->share() : grads_ + L.lo;
  int64_t after = 0;
  {
    trace::Span t("encode", "comm", L.x_n * int64_t{sizeof(float)}, b);
    // Every slice of this rank's x, block j for rank j of the exchange.
    for (int j = 0; j < W; ++j) {
      const int64_t len = SliceLength(L, j);
      EncodeParams p;
      p.seed = CompressedSeed(seed_step_, b, rank_, j, 0);
      uint8_t* out = send_.data() + j * L.block;
      const int64_t at = SliceStart(L, j);
      after += feedback_ ? ef_->Encode(g + at, L.x_lo + at, len, p, out)
                         : codec_->Encode(g + at, len, p, out);
    }
  }
  {
    trace::Span t("all-to-all", "comm", W * L.block, b);
    RETURN_IF_ERROR(exchange_->AllToAll(send_.data(), recv_.data(), L.block));
  }
  {
    trace::Span t("decode", "comm", W * L.block, b);
    // This rank's slice from every rank, summed in fp32 in rank order.
    std::fill(sum_.begin(), sum_.begin() + L.own_len, 0.f);
    for (int i = 0; i < W; ++i) codec_->DecodeAdd(recv_.data() + i * L.block, L.own_len, sum_.data());
  }
  {
    trace::Span t("encode", "comm", L.own_len * int64_t{sizeof(float)}, b);
    EncodeParams p;
    p.seed = CompressedSeed(seed_step_, b, rank_, ex_rank_, 1);
    after += feedback_ ? sum_ef_->Encode(sum_.data(), L.sum_offset, L.own_len, p, sum_block_.data())
                       : codec_->Encode(sum_.data(), L.own_len, p, sum_block_.data());
  }
  {
    trace::Span t("allgather", "comm", W * L.block, b);
    RETURN_IF_ERROR(exchange_->AllGather(sum_block_.data(), send_.data(), L.block));
  }
  {
    trace::Span t("decode", "comm", W * L.block, b);
    for (int j = 0; j < W; ++j) {
      codec_->Decode(send_.data() + j * L.block, SliceLength(L, j), g + SliceStart(L, j));
    }
  }
  stats_.Sent((W + 1) * L.block);
  stats_.Compressed((L.x_n + L.own_len) * int64_t{sizeof(float)}, after);
  if (feedback_) {
    residual_sq_ +=
        ef_->SumOfSquares(L.x_lo, L.x_n) + sum_ef_->SumOfSquares(L.sum_offset, L.own_len);
  }
  return hier_ ? GatherShares(b, L) : absl::OkStatus();
}

absl::Status CompressedSync::ReduceShare(int b, const BucketLayout& L) {
  absl::Status s = shares_->ReduceBucket(grads_ + L.lo, L.n);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(kLabel, ": intra-node reduce-scatter of bucket ",
                                               b, ": ", s.message()));
  }
  stats_.Sent(L.share * local_size_ * int64_t{sizeof(float)}, /*across_nodes=*/false);
  return absl::OkStatus();
}

absl::Status CompressedSync::GatherShares(int b, const BucketLayout& L) {
  absl::Status s = shares_->GatherBucket(grads_ + L.lo, L.n);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(kLabel, ": intra-node allgather of bucket ", b,
                                               ": ", s.message()));
  }
  stats_.Sent(L.share * int64_t{sizeof(float)}, /*across_nodes=*/false);
  return absl::OkStatus();
}

absl::Status CompressedSync::RunSparse(int b, const BucketLayout& L) {
  float* g = grads_ + L.lo;
  EncodeParams p;
  p.seed = CompressedSeed(seed_step_, b, rank_, 0, 0);
  p.workspace = workspace_.data();
  if (thresholds_ != nullptr) p.threshold = thresholds_->threshold(b);
  int64_t after;
  {
    trace::Span t("encode", "comm", L.n * int64_t{sizeof(float)}, b);
    after = feedback_ ? ef_->Encode(g, L.lo, L.n, p, send_.data())
                      : codec_->Encode(g, L.n, p, send_.data());
    if (thresholds_ != nullptr) thresholds_->Update(b, send_.data(), L.n);
  }
  {
    trace::Span t("allgather", "comm", world_size_ * L.block, b);
    RETURN_IF_ERROR(comm_->AllGather(send_.data(), recv_.data(), L.block));
  }
  {
    trace::Span t("decode", "comm", world_size_ * L.block, b);
    std::fill(g, g + L.n, 0.f);
    for (int i = 0; i < world_size_; ++i) codec_->DecodeAdd(recv_.data() + i * L.block, L.n, g);
  }
  stats_.Sent(L.block);
  stats_.Compressed(L.n * int64_t{sizeof(float)}, after);
  if (feedback_) residual_sq_ += ef_->SumOfSquares(L.lo, L.n);
  return absl::OkStatus();
}

}  // namespace compressed_internal

}  // namespace sync
}  // namespace tandem
