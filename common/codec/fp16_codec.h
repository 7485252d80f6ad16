// Fp16Codec: each value as IEEE half (2 bytes, round to nearest even),
// saturated to +-65504 so a large gradient stays finite (error feedback then
// keeps the excess); inf and NaN stay what they are (the loss scaler sees
// them). Block: n little-endian halves.
// See codec.h for thread-safety and failure.
#ifndef TANDEM_COMMON_CODEC_FP16_CODEC_H_
#define TANDEM_COMMON_CODEC_FP16_CODEC_H_

#include <memory>

#include "common/codec/codec.h"

namespace tandem {
namespace codec {

std::unique_ptr<Codec> MakeFp16Codec();

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_FP16_CODEC_H_
