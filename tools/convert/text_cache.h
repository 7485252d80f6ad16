// A byte-level text dataset converted once and kept in a cache directory:
// `tandem local --dataset=fortunes` uses it so the text is cut into record
// shards on the first run and reused afterwards.
//
//   TextCacheOptions o;
//   ASSIGN_OR_RETURN(o.sources, TextFilesIn("/usr/share/games/fortunes"));
//   o.cache_root = "/home/me/.cache/tandem";
//   o.name = "fortunes";
//   o.text.seq_len = 128;
//   ASSIGN_OR_RETURN(CachedText c, EnsureTextDataset(o));
//   // serve c.train_dir and c.eval_dir (directories of .tshard files)
//
// The entry is "<cache_root>/<name>-ctx<seq_len>-<key>" with train/ and
// eval/ inside; <key> hashes the format version, seq_len, eval_fraction and
// every source's path, size and mtime, so editing or reinstalling the text
// (or another context) makes a new entry. Entries are built in a temporary
// sibling directory and renamed into place, so an entry that exists is
// complete; concurrent callers may both convert, one rename wins and the
// other's copy is removed. Old entries are never deleted.
//
// Thread-safe (the file system is the only state). Fails with NOT_FOUND for
// a missing source, INVALID_ARGUMENT for bad options or too little text,
// and the file system's error (path and errno text) when the cache cannot be
// written.
#ifndef TANDEM_TOOLS_CONVERT_TEXT_CACHE_H_
#define TANDEM_TOOLS_CONVERT_TEXT_CACHE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/convert/convert.h"

namespace tandem {
namespace convert {

struct TextCacheOptions {
  std::vector<std::string> sources;  // text files, in order; not empty
  std::string cache_root;            // created (with parents) if missing
  std::string name = "text";         // entry and shard file prefix
  TextOptions text;                  // seq_len, eval_fraction
};

struct CachedText {
  std::string dir;        // the entry
  std::string train_dir;  // dir + "/train"
  std::string eval_dir;   // dir + "/eval"
  bool converted = false;  // true if this call built the entry
};

absl::StatusOr<CachedText> EnsureTextDataset(const TextCacheOptions& options);

}  // namespace convert
}  // namespace tandem

#endif  // TANDEM_TOOLS_CONVERT_TEXT_CACHE_H_
