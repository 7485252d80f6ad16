// Helpers for the gpu-tagged tests of the CUDA backend: skipping without a
// device, seeded random inputs, host <-> backend transfers and element-wise
// comparisons with a readable failure message. Test-only.
#ifndef TANDEM_COMMON_KERNELS_CUDA_GPU_TEST_UTIL_H_
#define TANDEM_COMMON_KERNELS_CUDA_GPU_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/kernels/cuda/device.h"
#include "gtest/gtest.h"

// Skips the current test unless a CUDA device is usable.
#define TANDEM_SKIP_WITHOUT_GPU()                                          \
  do {                                                                     \
    absl::StatusOr<int> tandem_count_ = ::tandem::cuda::DeviceCount();     \
    if (!tandem_count_.ok()) {                                             \
      GTEST_SKIP() << "no CUDA device: " << tandem_count_.status();        \
    }                                                                      \
    if (*tandem_count_ == 0) GTEST_SKIP() << "no CUDA device visible";    \
  } while (0)

#define TANDEM_ASSERT_OK(expr)                              \
  do {                                                      \
    const ::absl::Status tandem_s_ = (expr);                \
    ASSERT_TRUE(tandem_s_.ok()) << #expr << ": " << tandem_s_; \
  } while (0)

namespace tandem {
namespace cuda {
namespace testing {

// n values uniform in [lo, hi), deterministic for a seed.
inline std::vector<float> RandomVector(int64_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Expects |got[i] - want[i]| <= abs_tol + rel_tol * |want[i]| for every i
// (NaN matches NaN); reports the count and the worst few mismatches.
inline void ExpectAllClose(const std::vector<float>& got,
                           const std::vector<float>& want, double rel_tol,
                           double abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  std::string first;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    const double w = want[i];
    if (std::isnan(g) && std::isnan(w)) continue;
    const double err = std::fabs(g - w);
    const bool ok = err <= abs_tol + rel_tol * std::fabs(w);
    if (!ok) {
      if (bad < 5) {
        first += " [" + std::to_string(i) + "] got " + std::to_string(g) +
                 " want " + std::to_string(w) + ";";
      }
      ++bad;
    }
    if (err > worst && !std::isnan(err)) worst = err;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                    << " outside rel " << rel_tol << " abs " << abs_tol
                    << " (max abs err " << worst << "):" << first;
}

// The same host data in two backends (CPU reference and CUDA).
class Twin {
 public:
  Twin() = default;
  kernels::DeviceBuffer ref;  // on the reference (CPU) backend
  kernels::DeviceBuffer dev;  // on the backend under test
  int64_t bytes() const { return static_cast<int64_t>(ref.bytes()); }
  float* r() const { return ref.f32(); }
  float* d() const { return dev.f32(); }
  int32_t* ri() const { return ref.i32(); }
  int32_t* di() const { return dev.i32(); }
  uint16_t* ru() const { return ref.u16(); }
  uint16_t* du() const { return dev.u16(); }
};

template <typename T>
absl::Status MakeTwin(kernels::Backend& ref, kernels::Backend& dev,
                      const std::vector<T>& host, Twin* out) {
  const size_t bytes = host.size() * sizeof(T);
  absl::StatusOr<kernels::DeviceBuffer> a = ref.Allocate(bytes);
  if (!a.ok()) return a.status();
  absl::StatusOr<kernels::DeviceBuffer> b = dev.Allocate(bytes);
  if (!b.ok()) return b.status();
  out->ref = std::move(*a);
  out->dev = std::move(*b);
  if (bytes == 0) return absl::OkStatus();
  absl::Status s = ref.CopyToDevice(out->ref.data(), host.data(), bytes);
  if (!s.ok()) return s;
  return dev.CopyToDevice(out->dev.data(), host.data(), bytes);
}

template <typename T>
absl::Status Download(kernels::Backend& backend, const void* src, int64_t n,
                      std::vector<T>* out) {
  out->assign(n, T());
  if (n == 0) return backend.Synchronize();
  absl::Status s = backend.Synchronize();
  if (!s.ok()) return s;
  return backend.CopyToHost(out->data(), src, n * sizeof(T));
}

// Compares the first n floats of a twin once both backends are done:
// `dev`'s copy against `ref`'s, as ExpectAllClose.
inline void ExpectTwinClose(kernels::Backend& ref, kernels::Backend& dev, const Twin& t,
                            int64_t n, double rel_tol, double abs_tol, const std::string& what) {
  std::vector<float> want, got;
  const absl::Status a = Download(ref, t.r(), n, &want);
  ASSERT_TRUE(a.ok()) << what << ": " << a;
  const absl::Status b = Download(dev, t.d(), n, &got);
  ASSERT_TRUE(b.ok()) << what << ": " << b;
  ExpectAllClose(got, want, rel_tol, abs_tol, what);
}

}  // namespace testing
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_GPU_TEST_UTIL_H_
