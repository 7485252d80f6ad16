// Bf16Codec: each value as bfloat16 (the top 16 bits of fp32, round to
// nearest even; common/numeric/precision.h's conversion). Same range as fp32.
// Block: n little-endian bf16 values. See codec.h for thread-safety and
// failure.
#ifndef TANDEM_COMMON_CODEC_BF16_CODEC_H_
#define TANDEM_COMMON_CODEC_BF16_CODEC_H_

#include <memory>

#include "common/codec/codec.h"

namespace tandem {
namespace codec {

std::unique_ptr<Codec> MakeBf16Codec();

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_BF16_CODEC_H_
