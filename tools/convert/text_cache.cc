#include "tools/convert/text_cache.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace convert {
namespace {

// Bump when the shard layout TextToShards writes changes: old entries are
// then ignored rather than served.
constexpr int kFormatVersion = 1;

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status Unavailable(const std::string& what, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat("text cache: cannot ", what, " ", path, ": ",
                                             std::strerror(err)));
}

}  // namespace

absl::StatusOr<CachedText> EnsureTextDataset(const TextCacheOptions& options) {
  if (options.sources.empty()) {
    return absl::InvalidArgumentError("text cache: no source files given");
  }
  if (options.cache_root.empty()) {
    return absl::InvalidArgumentError("text cache: cache_root is empty; name a directory");
  }
  std::string key = absl::StrFormat("v%d seq_len=%d eval_fraction=%.17g\n", kFormatVersion,
                                    options.text.seq_len, options.text.eval_fraction);
  for (const std::string& path : options.sources) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      return Unavailable("stat", path, errno);
    }
    absl::StrAppendFormat(&key, "%s %d %d.%09d\n", path, static_cast<int64_t>(st.st_size),
                          static_cast<int64_t>(st.st_mtim.tv_sec),
                          static_cast<int64_t>(st.st_mtim.tv_nsec));
  }
  CachedText out;
  out.dir = absl::StrFormat("%s/%s-ctx%d-%016x", options.cache_root, options.name,
                            options.text.seq_len, Fnv1a(key));
  out.train_dir = out.dir + "/train";
  out.eval_dir = out.dir + "/eval";
  if (IsDirectory(out.dir)) return out;  // only complete entries are renamed in

  RETURN_IF_ERROR(MakeDirectories(options.cache_root));
  std::string tmpl = out.dir + ".tmp-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Unavailable("create a directory like", tmpl, errno);
  const std::string tmp = tmpl;
  auto build = [&]() -> absl::Status {
    ShardOutput train, eval;
    train.out_dir = tmp + "/train";
    eval.out_dir = tmp + "/eval";
    train.name = eval.name = options.name;
    for (const std::string& d : {train.out_dir, eval.out_dir}) {
      if (mkdir(d.c_str(), 0755) != 0) return Unavailable("create", d, errno);
    }
    return TextToShards(options.sources, options.text, train, eval).status();
  };
  absl::Status built = build();
  if (built.ok() && std::rename(tmp.c_str(), out.dir.c_str()) != 0) {
    const int err = errno;
    // Another caller finished the same entry first: use theirs.
    if (!((err == EEXIST || err == ENOTEMPTY) && IsDirectory(out.dir))) {
      built = Unavailable("rename into place", out.dir, err);
    }
  } else if (built.ok()) {
    out.converted = true;
  }
  if (!out.converted) {
    std::error_code ignored;  // best effort: a leftover tmp dir is never served
    std::filesystem::remove_all(tmp, ignored);
  }
  RETURN_IF_ERROR(built);
  return out;
}

}  // namespace convert
}  // namespace tandem
