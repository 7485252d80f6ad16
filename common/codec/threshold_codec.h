// ThresholdCodec: keeps every value with |x| >= EncodeParams::threshold,
// as (index, value) pairs, up to a capacity of ceil(max_density * n); when
// more pass, it keeps the `capacity` largest instead (never more bytes than
// MaxEncodedBytes). A threshold <= 0 means "none yet": it keeps the
// ceil(density * n) largest, and the block's min_kept (sparse_block.h) is
// then the threshold that hits the target density, where
// ThresholdController starts. The codec itself is stateless: the adaptive
// threshold is the controller's (threshold_controller.h), kept by the
// strategy. See codec.h for thread-safety and failure.
#ifndef TANDEM_COMMON_CODEC_THRESHOLD_CODEC_H_
#define TANDEM_COMMON_CODEC_THRESHOLD_CODEC_H_

#include <memory>

#include "common/codec/codec.h"

namespace tandem {
namespace codec {

struct ThresholdCodecOptions {
  double density = 0.01;      // target fraction kept, (0, 1]
  double max_density = 0.02;  // capacity fraction, [density, 1]
};

std::unique_ptr<Codec> MakeThresholdCodec(const ThresholdCodecOptions& options);

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_THRESHOLD_CODEC_H_
