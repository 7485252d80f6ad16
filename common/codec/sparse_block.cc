#include "common/codec/sparse_block.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace codec {
namespace sparse {
namespace {

// NaN sorts as +inf so the selection is a strict weak order and NaN is sent.
inline float Magnitude(float v) {
  const float m = std::fabs(v);
  return m != m ? std::numeric_limits<float>::infinity() : m;
}

TANDEM_CPU_INLINE void MagnitudesBody(const float* __restrict v, int64_t n, float* __restrict m) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    m[i] = a != a ? std::numeric_limits<float>::infinity() : a;
  }
}
TANDEM_CPU_DISPATCHED(Magnitudes, (const float* __restrict v, int64_t n, float* __restrict m),
                      (v, n, m))

TANDEM_CPU_INLINE void AddIntoKernelBody(const float* __restrict x, int64_t n, float* __restrict r) {
  for (int64_t i = 0; i < n; ++i) r[i] = x[i] + r[i];
}
TANDEM_CPU_DISPATCHED(AddIntoKernel, (const float* __restrict x, int64_t n, float* __restrict r),
                      (x, n, r))

// #{ |v| >= t } for t > 0, on the bits (NaN's are above inf's, so NaN
// counts): an integer compare vectorises.
TANDEM_CPU_INLINE int64_t CountAtLeastBody(const float* __restrict v, int64_t n, float t) {
  uint32_t tb;
  std::memcpy(&tb, &t, sizeof(tb));
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, sizeof(u));
    count += (u & 0x7fffffffu) >= tb ? 1 : 0;
  }
  return count;
}
__attribute__((target("avx2,fma"))) int64_t CountAtLeastAvx2(const float* v, int64_t n, float t) {
  return CountAtLeastBody(v, n, t);
}
int64_t CountAtLeast(const float* v, int64_t n, float t) {
  return numeric::CpuHasAvx2Fma() ? CountAtLeastAvx2(v, n, t) : CountAtLeastBody(v, n, t);
}

void WriteHeader(int64_t count, float min_kept, uint8_t* out) {
  const uint32_t c = static_cast<uint32_t>(count);
  std::memcpy(out, &c, 4);
  std::memcpy(out + 4, &min_kept, 4);
}

void WritePair(int64_t slot, int64_t index, float value, uint8_t* out) {
  const uint32_t i = static_cast<uint32_t>(index);
  uint8_t* p = out + kHeaderBytes + kPairBytes * slot;
  std::memcpy(p, &i, 4);
  std::memcpy(p + 4, &value, 4);
}

// Keeps |v| > t, and |v| == t while `ties` lasts, in index order.
int64_t Emit(const float* v, int64_t n, float t, int64_t ties, float* residual, uint8_t* out) {
  int64_t count = 0;
  float min_kept = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const float m = Magnitude(v[i]);
    bool keep = m > t;
    if (!keep && m == t && ties > 0) {
      keep = true;
      --ties;
    }
    if (keep) {
      WritePair(count++, i, v[i], out);
      min_kept = std::min(min_kept, m);
      if (residual != nullptr) residual[i] = 0.f;
    } else if (residual != nullptr && !(std::fabs(residual[i]) <= FLT_MAX)) {
      residual[i] = 0.f;
    }
  }
  WriteHeader(count, count > 0 ? min_kept : 0.f, out);
  return kHeaderBytes + kPairBytes * count;
}

}  // namespace

Header ReadHeader(const uint8_t* block) {
  uint32_t c;
  Header h;
  std::memcpy(&c, block, 4);
  std::memcpy(&h.min_kept, block + 4, 4);
  h.count = c;
  return h;
}

int64_t KeepCount(double fraction, int64_t n) {
  if (n <= 0) return 0;
  const double k = std::ceil(fraction * static_cast<double>(n));
  return std::clamp<int64_t>(static_cast<int64_t>(k), 1, n);
}

int64_t WorkspaceFloats(int64_t n) { return n == 0 ? 0 : n + kHistogramBins; }

// The k-th largest magnitude by a radix select on the bits (for
// non-negative floats the bit order is the value order; NaN maps to inf's
// bits, as Magnitude does): a histogram of the top 16 bits finds the bin
// holding it, then nth_element runs on that bin's values only. Two passes
// over the data instead of introselect's random access over all of it.
int64_t EncodeLargest(const float* v, int64_t n, int64_t k, float* workspace, float* residual,
                      uint8_t* out) {
  if (n == 0) return 0;  // MaxEncodedBytes(0) == 0: nothing, not even a header
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return Emit(v, n, std::numeric_limits<float>::infinity(), 0, residual, out);
  uint32_t* bits = reinterpret_cast<uint32_t*>(workspace);
  uint32_t* hist = bits + n;
  std::fill(hist, hist + kHistogramBins, 0u);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, sizeof(u));
    u &= 0x7fffffffu;
    u = u > 0x7f800000u ? 0x7f800000u : u;
    bits[i] = u;
    ++hist[u >> 16];
  }
  int64_t above = 0;  // magnitudes in higher bins
  int bin = kHistogramBins - 1;
  while (above + hist[bin] < k) above += hist[bin--];
  // Compact the bin's values to the front (never past the read position).
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if ((bits[i] >> 16) == static_cast<uint32_t>(bin)) bits[m++] = bits[i];
  }
  const int64_t rank = k - above - 1;  // 0-based, descending, within the bin
  std::nth_element(bits, bits + rank, bits + m, std::greater<uint32_t>());
  const uint32_t tb = bits[rank];
  int64_t greater = above;
  for (int64_t j = 0; j < rank; ++j) greater += bits[j] > tb ? 1 : 0;
  float t;
  std::memcpy(&t, &tb, sizeof(t));
  return Emit(v, n, t, k - greater, residual, out);
}

int64_t EncodeAbove(const float* v, int64_t n, float threshold, int64_t capacity,
                    float* workspace, float* residual, uint8_t* out) {
  if (n == 0) return 0;
  const int64_t count = CountAtLeast(v, n, threshold);
  if (count > capacity) return EncodeLargest(v, n, capacity, workspace, residual, out);
  // Everything >= threshold: "> t" with t just below it, no ties needed.
  return Emit(v, n, std::nextafter(threshold, 0.f), 0, residual, out);
}

void AddInto(const float* x, int64_t n, float* residual) { AddIntoKernel(x, n, residual); }

void Decode(const uint8_t* in, int64_t n, float* out) {
  std::fill(out, out + n, 0.f);
  DecodeAdd(in, n, out);
}

void DecodeAdd(const uint8_t* in, int64_t n, float* out) {
  if (n == 0) return;
  const Header h = ReadHeader(in);
  const uint8_t* p = in + kHeaderBytes;
  for (int64_t j = 0; j < h.count; ++j, p += kPairBytes) {
    uint32_t i;
    float value;
    std::memcpy(&i, p, 4);
    std::memcpy(&value, p + 4, 4);
    if (i < static_cast<uint64_t>(n)) out[i] += value;
  }
}

void ZeroAt(const uint8_t* in, int64_t n, float* out) {
  if (n == 0) return;
  const Header h = ReadHeader(in);
  const uint8_t* p = in + kHeaderBytes;
  for (int64_t j = 0; j < h.count; ++j, p += kPairBytes) {
    uint32_t i;
    std::memcpy(&i, p, 4);
    if (i < static_cast<uint64_t>(n)) out[i] = 0.f;
  }
}

}  // namespace sparse
}  // namespace codec
}  // namespace tandem
