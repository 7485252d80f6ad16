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
// Thread-safety: calls on disjoint offset ranges may run concurrently;
// residuals() / Reset() only when no Encode runs. Ownership: the codec is
// borrowed and outlives this object; the residuals are owned (allocated
// once, here). Failure: ranges outside [0, size) are a caller bug (DCHECK).
#ifndef TANDEM_COMMON_SYNC_ERROR_FEEDBACK_H_
#define TANDEM_COMMON_SYNC_ERROR_FEEDBACK_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/sync/codec.h"

namespace tandem {
namespace sync {

class ErrorFeedback {
 public:
  ErrorFeedback(const Codec* codec, int64_t size);
  // Residuals in `storage` (borrowed; zeroed here).
  ErrorFeedback(const Codec* codec, absl::Span<float> storage);
  ErrorFeedback(const ErrorFeedback&) = delete;
  ErrorFeedback& operator=(const ErrorFeedback&) = delete;

  const Codec& codec() const { return *codec_; }
  int64_t size() const { return static_cast<int64_t>(residual_.size()); }

  // Encodes x[0, n), the values at flat offsets [offset, offset + n), plus
  // their residuals; updates the residuals. Returns the bytes written.
  int64_t Encode(const float* x, int64_t offset, int64_t n, const EncodeParams& params,
                 uint8_t* out);

  // Sum of squared residuals over [offset, offset + n) (double).
  double SumOfSquares(int64_t offset, int64_t n) const;

  absl::Span<float> residuals() { return residual_; }
  void Reset();

 private:
  const Codec* const codec_;
  std::vector<float> owned_;  // empty when the storage is borrowed
  absl::Span<float> residual_;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ERROR_FEEDBACK_H_
