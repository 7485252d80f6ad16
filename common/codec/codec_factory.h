// CreateCodec: a codec by name with its options, checked: what
// `--sync_opt codec=...,k=...,density=...,chunk=...,rounding=...` selects.
//
//   CodecConfig c;  c.codec = "int8";  c.chunk = 512;
//   ASSIGN_OR_RETURN(std::unique_ptr<Codec> codec, CreateCodec(c));
//
// Failure: InvalidArgument naming the bad key, its value and what is
// allowed. Thread-safe (pure).
#ifndef TANDEM_COMMON_CODEC_CODEC_FACTORY_H_
#define TANDEM_COMMON_CODEC_CODEC_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/codec/codec.h"

namespace tandem {
namespace codec {

struct CodecConfig {
  std::string codec = "int8";  // int8 | fp16 | bf16 | topk | threshold
  double k = 0.01;             // topk: fraction kept, (0, 1]
  double density = 0.01;       // threshold: target fraction kept, (0, 1]
  double max_density = 0;      // threshold: capacity; 0 = min(1, 2 * density)
  int64_t chunk = 1024;        // int8: values per scale, 256..2048
  std::string rounding = "nearest";  // int8: nearest | stochastic
};

// The names CreateCodec accepts, "int8|fp16|bf16|topk|threshold".
const char* CodecNames();

absl::Status ValidateCodecConfig(const CodecConfig& config);
absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const CodecConfig& config);

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_CODEC_FACTORY_H_
