// ErrorFeedback: wraps any Codec so that what compression drops is not
// lost but carried into the next encode of the same values (Seide et al.,
// 1-bit SGD; BytePS's error-feedback decorator). It owns one fp32 residual
// per flat offset of a vector of `size` values, so the residual of a value
// does not depend on how the vector is cut into buckets or slices:
//
//   ErrorFeedback ef(codec.get(), n);
//   // encode values for flat offsets [lo, lo + m):
//   int64_t bytes = ef.Encode(grads + lo, lo, m, params, block);
//
// Encode is the codec's fused EncodeWithFeedback (residual add, quantize,
// new residual in one pass). Over many steps the sum of what was sent
// differs from the sum of the inputs by exactly the current residual,
// which stays bounded (error_feedback_test).
//
// Momentum correction (Deep Gradient Compression, Lin et al., ICLR'18):
// given a velocity buffer (one float per flat offset, like the residuals)
// and the SGD momentum m, Encode accumulates local momentum before the
// residual, u <- m u + x, v <- v + u, sends codec(v), and then zeroes v
// (the codec's feedback) and u (momentum factor masking) where a value was
// sent; which values were sent is read from the encoded block
// (Codec::ZeroSent), never inferred from the residual being zero. The
// caller then applies the sum of what was sent by plain SGD, without
// momentum. AddMomentum is for values sent whole instead (warm-up, small
// buckets): x <- u <- m u + x, nothing masked (nothing is delayed, so
// this is exactly momentum SGD for them).
//
// Thread-safety: calls on disjoint offset ranges may run concurrently;
// residuals() / Reset() only when no Encode runs. Ownership: the codec is
// borrowed and outlives this object; the residuals are owned (allocated
// once, here). Failure: ranges outside [0, size) are a caller bug (DCHECK).
#ifndef TANDEM_COMMON_CODEC_ERROR_FEEDBACK_H_
#define TANDEM_COMMON_CODEC_ERROR_FEEDBACK_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/codec/codec.h"

namespace tandem {
namespace codec {

class ErrorFeedback {
 public:
  ErrorFeedback(const Codec* codec, int64_t size);
  // Residuals in `storage` (borrowed; zeroed here).
  ErrorFeedback(const Codec* codec, absl::Span<float> storage);
  // Momentum correction: residuals in `storage`, velocity in `velocity`
  // (borrowed, the same length; both zeroed here), momentum in [0, 1).
  // mask = false keeps the velocity of sent values (momentum correction
  // without factor masking: DGC's ablation).
  ErrorFeedback(const Codec* codec, absl::Span<float> storage, absl::Span<float> velocity,
                float momentum, bool mask = true);
  ErrorFeedback(const ErrorFeedback&) = delete;
  ErrorFeedback& operator=(const ErrorFeedback&) = delete;

  const Codec& codec() const { return *codec_; }
  int64_t size() const { return static_cast<int64_t>(residual_.size()); }

  // Encodes x[0, n), the values at flat offsets [offset, offset + n), plus
  // their residuals; updates the residuals (and with momentum correction
  // the velocity first, then masks it). Returns the bytes written.
  int64_t Encode(const float* x, int64_t offset, int64_t n, const EncodeParams& params,
                 uint8_t* out);
  // Momentum correction only: x[i] <- u[i] <- m u[i] + x[i] over
  // [offset, offset + n), for values that are then sent uncompressed.
  void AddMomentum(float* x, int64_t offset, int64_t n);

  // Sum of squared residuals over [offset, offset + n) (double).
  double SumOfSquares(int64_t offset, int64_t n) const;

  absl::Span<float> residuals() { return residual_; }
  // Empty without momentum correction.
  absl::Span<float> velocity() { return velocity_; }
  bool momentum_correction() const { return momentum_correction_; }
  // Zeroes the residuals and the velocity.
  void Reset();

 private:
  const Codec* const codec_;
  std::vector<float> owned_;  // empty when the storage is borrowed
  absl::Span<float> residual_;
  const bool momentum_correction_ = false;
  const float momentum_ = 0;
  const bool mask_ = true;
  absl::Span<float> velocity_;
};

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_ERROR_FEEDBACK_H_
