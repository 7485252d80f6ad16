// Test-only helpers shared by compressed_sync_test and
// compressed_momentum_test: ragged backward ranges, per-rank gradients, the
// codec configurations, the flat-vector options and a step loop.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_TEST_UTIL_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_TEST_UTIL_H_

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_factory.h"
#include "common/comm/communicator.h"
#include "common/status/status_macros.h"
#include "common/sync/compressed/compressed_sync.h"

namespace tandem {
namespace sync {
namespace compressed_testing {

using codec::CodecConfig;

// Ranges in backward order: descending memory, ragged sizes.
inline std::vector<std::pair<int64_t, int64_t>> RaggedRanges(int64_t* size) {
  const std::vector<int64_t> sizes = {3, 1, 2049, 7, 300, 1000, 2};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t hi = total;
  for (int64_t s : sizes) {
    ranges.push_back({hi - s, hi});
    hi -= s;
  }
  *size = total;
  return ranges;
}

inline constexpr double kCapMb = 0.004;  // ~1000 floats: several buckets, one of 2049 alone

inline float Gradient(int rank, int step, int64_t i) {
  // Different magnitudes per region so int8 chunks get different scales.
  const float v = std::sin(0.013f * i * (rank + 1) + step) * (1 + (i / 700) % 4);
  return v + 0.01f * rank;
}

struct Case {
  std::string codec;
  bool ef;
  int world;
  std::string rounding = "nearest";
};

inline std::string Name(const Case& c) {
  return absl::StrCat(c.codec, c.rounding == "stochastic" ? "_stochastic" : "", c.ef ? "_ef" : "",
                      "_w", c.world);
}

inline void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

inline CodecConfig Config(const Case& c) {
  CodecConfig cc;
  cc.codec = c.codec;
  cc.chunk = 256;
  cc.k = 0.05;
  cc.density = 0.05;
  cc.rounding = c.rounding;
  return cc;
}

// The options every run here shares: the flat vectors, backward's ranges
// and the test's bucket cap; codec and the rest are the caller's.
inline CompressedSyncOptions VectorOptions(Communicator* comm, std::vector<float>& params,
                                           std::vector<float>& grads,
                                           const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  CompressedSyncOptions o;
  o.comm = comm;
  o.params = params.data();
  o.grads = grads.data();
  o.size = static_cast<int64_t>(params.size());
  o.ready_ranges = ranges;
  o.bucket_cap_mb = kCapMb;
  return o;
}

// Steps 1..steps: `fill(step)` writes the gradients (step from 0), every
// range is reported, FinishStep at learning rate `lr`; `after` runs after
// each step when given.
inline absl::Status RunSteps(GradientSync& sync,
                             const std::vector<std::pair<int64_t, int64_t>>& ranges, int steps,
                             float lr, const std::function<void(int)>& fill,
                             const std::function<void()>& after = nullptr) {
  for (int step = 0; step < steps; ++step) {
    fill(step);
    RETURN_IF_ERROR(sync.BeginStep({}));
    for (const auto& [lo, hi] : ranges) sync.OnGradientsReady(lo, hi);
    optim::StepContext ctx;
    ctx.step = step + 1;
    ctx.lr = lr;
    RETURN_IF_ERROR(sync.FinishStep(ctx));
    if (after) after();
  }
  return absl::OkStatus();
}

}  // namespace compressed_testing
}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_TEST_UTIL_H_
