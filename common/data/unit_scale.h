// U8ToUnitF32: the one formula that turns u8 features (pixels) into floats in
// [0, 1], x / 255 as x * (1 / 255) in fp32. The data server (batch_stream.cc,
// normalize_to_f32) and the worker's data client (prefetch_client.cc,
// normalize_here) both call it, so the two paths give the same bits.
// Stateless; thread-safe.
#ifndef TANDEM_COMMON_DATA_UNIT_SCALE_H_
#define TANDEM_COMMON_DATA_UNIT_SCALE_H_

#include <cstdint>

namespace tandem {
namespace data {

inline void U8ToUnitF32(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t e = 0; e < n; ++e) dst[e] = static_cast<float>(src[e]) * (1.0f / 255.0f);
}

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_UNIT_SCALE_H_
