#include "common/codec/error_feedback.h"

#include <algorithm>

#include "common/log/log.h"

namespace tandem {
namespace codec {

ErrorFeedback::ErrorFeedback(const Codec* codec, int64_t size)
    : codec_(codec),
      owned_(static_cast<size_t>(std::max<int64_t>(size, 0)), 0.f),
      residual_(absl::MakeSpan(owned_)) {}

ErrorFeedback::ErrorFeedback(const Codec* codec, absl::Span<float> storage)
    : codec_(codec), residual_(storage) {
  Reset();
}

ErrorFeedback::ErrorFeedback(const Codec* codec, absl::Span<float> storage,
                             absl::Span<float> velocity, float momentum, bool mask)
    : codec_(codec),
      residual_(storage),
      momentum_correction_(true),
      momentum_(momentum),
      mask_(mask),
      velocity_(velocity) {
  DCHECK(velocity.size() == storage.size());
  Reset();
}

int64_t ErrorFeedback::Encode(const float* x, int64_t offset, int64_t n,
                              const EncodeParams& params, uint8_t* out) {
  DCHECK(offset >= 0 && n >= 0 && offset + n <= size());
  if (!momentum_correction_) {
    return codec_->EncodeWithFeedback(x, residual_.data() + offset, n, params, out);
  }
  // u <- m u + x here; v <- v + u is the codec's fused feedback add (so the
  // residual update stays the codec's own kernel); one extra pass over n,
  // cheap next to the selection.
  float* u = velocity_.data() + offset;
  const float m = momentum_;
  for (int64_t i = 0; i < n; ++i) u[i] = m * u[i] + x[i];
  const int64_t bytes = codec_->EncodeWithFeedback(u, residual_.data() + offset, n, params, out);
  // Momentum factor masking: what was sent no longer carries momentum.
  if (mask_) codec_->ZeroSent(out, n, u);
  return bytes;
}

void ErrorFeedback::AddMomentum(float* x, int64_t offset, int64_t n) {
  DCHECK(momentum_correction_);
  DCHECK(offset >= 0 && n >= 0 && offset + n <= size());
  float* u = velocity_.data() + offset;
  const float m = momentum_;
  for (int64_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + x[i];
    x[i] = u[i];
  }
}

double ErrorFeedback::SumOfSquares(int64_t offset, int64_t n) const {
  // Four partial sums: independent chains the compiler can pipeline.
  double s[4] = {0, 0, 0, 0};
  const float* r = residual_.data() + offset;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(r[i + j]) * r[i + j];
  }
  for (; i < n; ++i) s[0] += static_cast<double>(r[i]) * r[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void ErrorFeedback::Reset() {
  std::fill(residual_.begin(), residual_.end(), 0.f);
  std::fill(velocity_.begin(), velocity_.end(), 0.f);
}

}  // namespace codec
}  // namespace tandem
