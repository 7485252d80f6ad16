#include "common/codec/threshold_controller.h"

#include <algorithm>
#include <cmath>

#include "common/codec/sparse_block.h"

namespace tandem {
namespace codec {

ThresholdController::ThresholdController(int keys, const ThresholdControllerOptions& options)
    : density_(options.density), thresholds_(std::max(keys, 0), 0.f) {}

float ThresholdController::Next(float current, int64_t kept, int64_t target, float min_kept) {
  if (!(current > 0)) return min_kept > 0 && std::isfinite(min_kept) ? min_kept : 0.f;
  if (target <= 0) return current;
  if (kept == 0) return current * 0.5f;
  const double factor =
      std::clamp(std::sqrt(static_cast<double>(kept) / static_cast<double>(target)), 0.5, 2.0);
  const float next = static_cast<float>(current * factor);
  // Never to 0 or inf: 0 would mean "start again", inf would keep nothing.
  return std::isfinite(next) && next > 0 ? next : current;
}

void ThresholdController::Update(int key, const uint8_t* block, int64_t n) {
  if (n == 0) return;
  const sparse::Header h = sparse::ReadHeader(block);
  thresholds_[key] = Next(thresholds_[key], h.count, sparse::KeepCount(density_, n), h.min_kept);
}

void ThresholdController::Reset() { std::fill(thresholds_.begin(), thresholds_.end(), 0.f); }

}  // namespace codec
}  // namespace tandem
