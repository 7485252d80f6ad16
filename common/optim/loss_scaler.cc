#include "common/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace optim {
namespace {

constexpr char kMagic[4] = {'T', 'L', 'S', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kStateBytes = 4 + 4 + 4 + 4 + 8 * 4;  // see header; 4 pad

// Little-endian host assumed (x86-64, aarch64); checked at compile time.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "loss scaler state encoding assumes a little-endian host");

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

absl::StatusOr<DynamicLossScaler> DynamicLossScaler::Create(
    const LossScalerOptions& o) {
  auto bad = [](absl::string_view field, double v, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LossScalerOptions.", field, " must be ", want, ", got ", v));
  };
  if (!(o.initial_scale > 0) || !std::isfinite(o.initial_scale))
    return bad("initial_scale", o.initial_scale, "finite and > 0");
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor))
    return bad("growth_factor", o.growth_factor, "finite and > 1");
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
    return bad("backoff_factor", o.backoff_factor, "in (0, 1)");
  if (o.growth_interval < 1)
    return bad("growth_interval", o.growth_interval, ">= 1");
  if (!(o.min_scale > 0) || o.min_scale > o.initial_scale)
    return bad("min_scale", o.min_scale, "> 0 and <= initial_scale");
  if (!(o.max_scale >= o.initial_scale) || !std::isfinite(o.max_scale))
    return bad("max_scale", o.max_scale, "finite and >= initial_scale");
  if (o.max_consecutive_skips < 0)
    return bad("max_consecutive_skips", o.max_consecutive_skips,
               ">= 0 (0 = unlimited)");
  return DynamicLossScaler(o);
}

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& options)
    : options_(options),
      scale_(options.initial_scale),
      last_scale_(options.initial_scale) {}

absl::StatusOr<LossScaleDecision> DynamicLossScaler::Update(
    bool found_non_finite) {
  last_scale_ = scale_;
  if (found_non_finite) {
    ++skipped_;
    ++consecutive_skips_;
    growth_tracker_ = 0;
    scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
    if (options_.max_consecutive_skips > 0 &&
        consecutive_skips_ >= options_.max_consecutive_skips) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fp16 gradients were inf/NaN for ", consecutive_skips_,
          " steps in a row (loss scale now ", scale_,
          ", min_scale ", options_.min_scale,
          "): training has diverged; lower the learning rate, use bf16, or "
          "restore an earlier checkpoint"));
    }
    return LossScaleDecision::kSkip;
  }
  ++applied_;
  consecutive_skips_ = 0;
  if (++growth_tracker_ >= options_.growth_interval) {
    scale_ = std::min(scale_ * options_.growth_factor, options_.max_scale);
    growth_tracker_ = 0;
  }
  return LossScaleDecision::kApply;
}

std::string DynamicLossScaler::SerializeState() const {
  std::string out;
  out.reserve(kStateBytes);
  out.append(kMagic, 4);
  Put<uint32_t>(&out, kVersion);
  Put<float>(&out, scale_);
  Put<uint32_t>(&out, 0);  // padding, keeps the int64s 8-aligned
  Put<int64_t>(&out, growth_tracker_);
  Put<int64_t>(&out, skipped_);
  Put<int64_t>(&out, applied_);
  Put<int64_t>(&out, consecutive_skips_);
  return out;
}

absl::Status DynamicLossScaler::RestoreState(absl::string_view bytes) {
  if (bytes.size() != kStateBytes || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state is not a record written by SerializeState() (",
        bytes.size(), " bytes, expected ", kStateBytes, " starting 'TLSS')"));
  }
  const char* p = bytes.data();
  const uint32_t version = Get<uint32_t>(p + 4);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state has version ", version, "; this build reads ",
        kVersion));
  }
  const float scale = Get<float>(p + 8);
  const int64_t tracker = Get<int64_t>(p + 16);
  const int64_t skipped = Get<int64_t>(p + 24);
  const int64_t applied = Get<int64_t>(p + 32);
  const int64_t consecutive = Get<int64_t>(p + 40);
  if (!(scale > 0) || !std::isfinite(scale) || tracker < 0 || skipped < 0 ||
      applied < 0 || consecutive < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state holds invalid values (scale ", scale,
        ", counters ", tracker, "/", skipped, "/", applied, "/", consecutive,
        ")"));
  }
  scale_ = last_scale_ = scale;
  growth_tracker_ = tracker;
  skipped_ = skipped;
  applied_ = applied;
  consecutive_skips_ = consecutive;
  return absl::OkStatus();
}

}  // namespace optim
}  // namespace tandem
