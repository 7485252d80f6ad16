#include "common/codec/codec_factory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/codec/bf16_codec.h"
#include "common/codec/fp16_codec.h"
#include "common/codec/int8_codec.h"
#include "common/codec/threshold_codec.h"
#include "common/codec/topk_codec.h"

namespace tandem {
namespace codec {
namespace {

bool Fraction(double f) { return std::isfinite(f) && f > 0 && f <= 1; }

double MaxDensity(const CodecConfig& c) {
  return c.max_density > 0 ? c.max_density : std::min(1.0, 2 * c.density);
}

}  // namespace

const char* CodecNames() { return "int8|fp16|bf16|topk|threshold"; }

absl::Status ValidateCodecConfig(const CodecConfig& c) {
  if (c.codec != "int8" && c.codec != "fp16" && c.codec != "bf16" && c.codec != "topk" &&
      c.codec != "threshold") {
    return absl::InvalidArgumentError(
        absl::StrCat("codec must be one of ", CodecNames(), ", got '", c.codec, "'"));
  }
  if (c.codec == "int8") {
    if (c.chunk < 256 || c.chunk > 2048) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk (int8 values per scale) must be in 256..2048, got ", c.chunk));
    }
    if (c.rounding != "nearest" && c.rounding != "stochastic") {
      return absl::InvalidArgumentError(absl::StrCat(
          "rounding must be nearest or stochastic, got '", c.rounding, "'"));
    }
  }
  if (c.codec == "topk" && !Fraction(c.k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("k (fraction of values top-k keeps) must be in (0, 1], got ", c.k));
  }
  if (c.codec == "threshold") {
    if (!Fraction(c.density)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "density (target fraction the threshold keeps) must be in (0, 1], got ", c.density));
    }
    if (c.max_density != 0 && (!Fraction(c.max_density) || c.max_density < c.density)) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_density must be in [density, 1] (", c.density, ", 1], got ",
                       c.max_density));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const CodecConfig& c) {
  if (absl::Status s = ValidateCodecConfig(c); !s.ok()) return s;
  if (c.codec == "int8") {
    Int8CodecOptions o;
    o.chunk = c.chunk;
    o.rounding = c.rounding == "stochastic" ? Rounding::kStochastic : Rounding::kNearest;
    return MakeInt8Codec(o);
  }
  if (c.codec == "fp16") return MakeFp16Codec();
  if (c.codec == "bf16") return MakeBf16Codec();
  if (c.codec == "topk") return MakeTopkCodec({c.k});
  ThresholdCodecOptions o;
  o.density = c.density;
  o.max_density = MaxDensity(c);
  return MakeThresholdCodec(o);
}

}  // namespace codec
}  // namespace tandem
