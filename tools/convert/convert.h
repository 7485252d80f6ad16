// Converters into tandem's record-shard datasets (the library behind the
// `convert` CLI; main.cc only parses flags).
//
//   IDX -> shards: every sample of an IDX dataset (features u8, labels i32)
//   becomes one record; the result serves the same samples as the IDX files.
//   Tokens -> shards: a raw file of little-endian tokens (u16 or i32) is cut
//   into non-overlapping windows of seq_len+1 tokens; each record holds the
//   first seq_len tokens as features and the last seq_len as labels (the
//   next-token targets), both i32 [seq_len]. A tail shorter than a window is
//   dropped (reported in the result).
//   Synthetic: num_records records of record_bytes random bytes (u8
//   features) and an i32 label, for benchmarks and tests.
//
// Output files are "<out_dir>/<name>-NNNNN-of-MMMMM.tshard", at most
// records_per_shard records each. Thread-compatible (pure functions over the
// file system). Fails with the reader's or writer's Status (file + offset).
#ifndef TANDEM_TOOLS_CONVERT_CONVERT_H_
#define TANDEM_TOOLS_CONVERT_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace convert {

struct ShardOutput {
  std::string out_dir;           // must exist
  std::string name = "data";     // file name prefix
  int64_t records_per_shard = 100000;  // > 0
};

struct ConvertResult {
  std::vector<std::string> files;
  int64_t records = 0;
  int64_t dropped_tokens = 0;  // tokens: the tail shorter than a window
};

absl::StatusOr<ConvertResult> IdxToShards(const std::string& images_path,
                                          const std::string& labels_path,
                                          const ShardOutput& out);

enum class TokenType { kU16, kI32 };

absl::StatusOr<ConvertResult> TokensToShards(const std::string& tokens_path,
                                             TokenType type, int64_t seq_len,
                                             const ShardOutput& out);

absl::StatusOr<ConvertResult> SyntheticShards(int64_t num_records,
                                              int64_t record_bytes,
                                              uint64_t seed,
                                              const ShardOutput& out);

}  // namespace convert
}  // namespace tandem

#endif  // TANDEM_TOOLS_CONVERT_CONVERT_H_
