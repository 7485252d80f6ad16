// Int8Codec: 8-bit linear quantization with one fp32 scale per chunk of
// `chunk` values (scale = max|x| / 127 over the chunk, q = round(x / scale)
// in [-127, 127]), the DeepSpeed ZeRO++ / BytePS shape. Block layout for n
// values: ceil(n / chunk) fp32 scales, then n int8 codes (4 * chunks + n
// bytes). Rounding: nearest (|x - q * scale| <= scale / 2, up to one fp32
// rounding of x / scale) or stochastic (q = floor(x / scale + u), u in
// [0, 1) a hash of (seed, index): unbiased, reproducible for a seed).
// See codec.h for thread-safety and failure.
#ifndef TANDEM_COMMON_CODEC_INT8_CODEC_H_
#define TANDEM_COMMON_CODEC_INT8_CODEC_H_

#include <cstdint>
#include <memory>

#include "common/codec/codec.h"

namespace tandem {
namespace codec {

enum class Rounding { kNearest, kStochastic };

struct Int8CodecOptions {
  int64_t chunk = 1024;  // values per scale, 256..2048 (checked by codec_factory)
  Rounding rounding = Rounding::kNearest;
};

std::unique_ptr<Codec> MakeInt8Codec(const Int8CodecOptions& options);

// The dither for element i under `seed`, in [0, 1) (what stochastic
// rounding adds before the floor; exposed for tests).
float StochasticDither(uint64_t seed, int64_t i);

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_INT8_CODEC_H_
