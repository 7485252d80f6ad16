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
//   Text -> shards: the bytes of one or more text files, concatenated in the
//   order given, are byte-level tokens (each byte one token 0..255, vocab
//   kByteVocab = 256; num_classes 256) cut into windows exactly as for
//   tokens. The first windows become the train dataset, the last
//   eval_fraction of them (at least one) the eval dataset, in two output
//   directories (so each is one servable dataset directory).
//   Synthetic: num_records records of record_bytes random bytes (u8
//   features) and an i32 label, for benchmarks and tests.
//
// Output files are "<out_dir>/<name>-NNNNN-of-MMMMM.tshard", at most
// records_per_shard records each. Thread-compatible (pure functions over the
// file system). Fails with the reader's or writer's Status (file + offset).
#ifndef TANDEM_TOOLS_CONVERT_CONVERT_H_
#define TANDEM_TOOLS_CONVERT_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/dataserver.pb.h"

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

// Writes `n` records, record i produced by `fill(i, &record)` (features
// bytes then label bytes, as `info`'s specs say), into shards of `out`
// whose metadata is `info`. INVALID_ARGUMENT for n <= 0 or a bad
// records_per_shard; the writer's or fill's error otherwise.
absl::StatusOr<ConvertResult> WriteShards(
    const ShardOutput& out, const v1::DatasetInfo& info, int64_t n,
    const std::function<absl::Status(int64_t, std::string*)>& fill);

absl::StatusOr<ConvertResult> IdxToShards(const std::string& images_path,
                                          const std::string& labels_path,
                                          const ShardOutput& out);

enum class TokenType { kU16, kI32 };

absl::StatusOr<ConvertResult> TokensToShards(const std::string& tokens_path,
                                             TokenType type, int64_t seq_len,
                                             const ShardOutput& out);

// Byte-level text: every byte value is a token.
inline constexpr int kByteVocab = 256;

struct TextOptions {
  int64_t seq_len = 128;        // tokens per sample (the model's context), > 0
  double eval_fraction = 0.05;  // last windows -> eval; in (0, 1)
};

struct TextResult {
  ConvertResult train;
  ConvertResult eval;  // dropped_tokens is reported in train only
  int64_t bytes = 0;   // text bytes read
};

// INVALID_ARGUMENT for bad options, no files, or text too short for one
// train and one eval window; NOT_FOUND for a missing file. train_out and
// eval_out must name different directories for the two to be served apart.
absl::StatusOr<TextResult> TextToShards(const std::vector<std::string>& text_paths,
                                        const TextOptions& options,
                                        const ShardOutput& train_out,
                                        const ShardOutput& eval_out);

// The text files of a directory such as /usr/share/games/fortunes (Debian
// package `fortunes`), sorted by name: regular files only (symbolic links,
// e.g. fortunes' "*.u8" aliases, are skipped so no text is counted twice),
// without strfile's binary "*.dat" indexes and hidden files. NOT_FOUND if
// the directory is missing or holds none.
absl::StatusOr<std::vector<std::string>> TextFilesIn(const std::string& dir);

absl::StatusOr<ConvertResult> SyntheticShards(int64_t num_records,
                                              int64_t record_bytes,
                                              uint64_t seed,
                                              const ShardOutput& out);

}  // namespace convert
}  // namespace tandem

#endif  // TANDEM_TOOLS_CONVERT_CONVERT_H_
