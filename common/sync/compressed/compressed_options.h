// `--sync compressed --sync_opt ...` into the strategy's options, with each
// codec's accurate defaults (what a user who names only the codec gets):
//
//   codec      defaults (explicit keys override each)
//   int8       ef=1 (int8+EF trains at allreduce's accuracy; no warm-up)
//   fp16/bf16  ef=1
//   topk       k=0.01 ef=1 warmup_steps=200 momentum_correction=1 masking=0
//   threshold  density=0.01 ef=1 warmup_steps=200 momentum_correction=1 masking=0
//   powersgd   rank=4 ef=1 warmup_steps=10 min_compression=2 embeddings=0
//
// (topk/threshold: the setting measured within half a point of allreduce
// on Fashion-MNIST, docs/user-guide.md; plain top-k lost 1.0-1.8 points.
// powersgd embeddings=0: embedding tables go uncompressed — their
// gradients are row-sparse, which a rank-R product approximates badly;
// measured on the GPT, docs/benchmarks.md.)
// Momentum correction by default gives way to an optimizer that keeps its
// own momentum (adamw, sgd with nesterov): the worker then builds that
// optimizer as usual (it checks that the key was not given) and
// CreateFromRegistry turns the correction off, saying so in the header.
//
//   ASSIGN_OR_RETURN(ParsedCompressed p, ParseCompressedOptions(sync_options));
//   LOG(INFO) << p.Header();  // "compressed: codec=topk k=0.01 ... (defaults for topk: ...)"
//
// Pure; InvalidArgument naming the key for a bad value, a key the codec
// does not use, or a combination that cannot work.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_OPTIONS_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {

struct ParsedCompressed {
  // Every codec's options but powersgd's (codec.codec names the codec,
  // "powersgd" included); the env's parts are left empty.
  CompressedSyncOptions options;
  int64_t rank = 4;             // powersgd
  double min_compression = 2;   // powersgd
  bool compress_embeddings = false;  // powersgd embeddings=1
  // The keys that took their codec's default, in the order Header lists.
  std::vector<std::string> defaulted;
  // momentum_correction=1 came from the default (not the user).
  bool default_momentum_correction = false;

  bool powersgd() const { return options.codec.codec == "powersgd"; }
  // One line: every resolved value, then which came from the codec's
  // defaults, e.g. "compressed: codec=topk k=0.01 ef=1 warmup_steps=200
  // momentum_correction=1 masking=0 (defaults for topk: k, ...)".
  std::string Header() const;
};

absl::StatusOr<ParsedCompressed> ParseCompressedOptions(const SyncOptions& options);

// The names the codec key accepts: "int8 | fp16 | bf16 | topk | threshold | powersgd".
const char* CompressedCodecNames();

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_OPTIONS_H_
