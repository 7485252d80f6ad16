// ThresholdController: the adaptive state of the threshold codec, kept by
// the strategy (the codec is stateless). One threshold per key (a bucket):
// it starts at 0 ("none": the codec keeps the target density of largest
// values and reports the smallest it kept, which becomes the threshold),
// then after every encode moves multiplicatively towards the target
// density: t *= clamp(sqrt(kept / target), 1/2, 2) (kept = 0 halves it).
//
//   ThresholdController tc(buckets, {.density = 0.01});
//   p.threshold = tc.threshold(b);
//   codec->EncodeWithFeedback(..., p, block);
//   tc.Update(b, block, n);
//
// Thread-safety: one thread per key at a time; thresholds() for
// checkpoints only between steps. Ownership: thresholds are owned.
#ifndef TANDEM_COMMON_CODEC_THRESHOLD_CONTROLLER_H_
#define TANDEM_COMMON_CODEC_THRESHOLD_CONTROLLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace tandem {
namespace codec {

struct ThresholdControllerOptions {
  double density = 0.01;  // target fraction kept, (0, 1]
};

class ThresholdController {
 public:
  ThresholdController(int keys, const ThresholdControllerOptions& options);

  float threshold(int key) const { return thresholds_[key]; }
  // `block` is what the threshold codec just encoded for n values with
  // threshold(key).
  void Update(int key, const uint8_t* block, int64_t n);
  // The next threshold from the current one, what was kept and the target
  // count (exposed for tests).
  static float Next(float current, int64_t kept, int64_t target, float min_kept);

  absl::Span<float> thresholds() { return absl::MakeSpan(thresholds_); }
  void Reset();

 private:
  const double density_;
  std::vector<float> thresholds_;
};

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_THRESHOLD_CONTROLLER_H_
