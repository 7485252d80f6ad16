// TopkCodec: keeps exactly KeepCount(fraction, n) = ceil(fraction * n)
// (at least 1) values of largest magnitude, as (index, value) pairs; the
// rest are dropped (error feedback carries them to later steps). Ties at
// the k-th magnitude go to the lowest indices; NaN counts as largest.
// Block: sparse_block.h's layout, at most 8 + 8k bytes.
// See codec.h for thread-safety and failure.
#ifndef TANDEM_COMMON_CODEC_TOPK_CODEC_H_
#define TANDEM_COMMON_CODEC_TOPK_CODEC_H_

#include <memory>

#include "common/codec/codec.h"

namespace tandem {
namespace codec {

struct TopkCodecOptions {
  double fraction = 0.01;  // (0, 1] (checked by codec_factory)
};

std::unique_ptr<Codec> MakeTopkCodec(const TopkCodecOptions& options);

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_TOPK_CODEC_H_
