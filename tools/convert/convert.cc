#include "tools/convert/convert.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/idx.h"
#include "common/data/record_shard.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "proto/dataserver.pb.h"
#include "common/data/dataset.h"

namespace tandem {
namespace convert {

absl::StatusOr<ConvertResult> WriteShards(
    const ShardOutput& out, const v1::DatasetInfo& info, int64_t n,
    const std::function<absl::Status(int64_t, std::string*)>& fill) {
  if (out.records_per_shard <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "records_per_shard is ", out.records_per_shard, "; it must be > 0"));
  }
  if (n <= 0) {
    return absl::InvalidArgumentError("nothing to convert: 0 records");
  }
  const std::string metadata = data::EncodeShardMetadata(info);
  const int64_t num_shards = (n + out.records_per_shard - 1) / out.records_per_shard;
  ConvertResult result;
  std::string record;
  for (int64_t s = 0; s < num_shards; ++s) {
    const std::string path = absl::StrFormat("%s/%s-%05d-of-%05d.tshard",
                                             out.out_dir, out.name, s, num_shards);
    ASSIGN_OR_RETURN(auto writer, data::RecordShardWriter::Create(path, metadata));
    const int64_t end = std::min(n, (s + 1) * out.records_per_shard);
    for (int64_t i = s * out.records_per_shard; i < end; ++i) {
      RETURN_IF_ERROR(fill(i, &record));
      RETURN_IF_ERROR(writer->Add(record));
    }
    RETURN_IF_ERROR(writer->Finish());
    result.files.push_back(path);
  }
  result.records = n;
  return result;
}

namespace {

// Language-model records from `count` consecutive non-overlapping windows of
// seq_len + 1 tokens starting at window `first`: features are a window's
// first seq_len tokens, labels its last seq_len (next-token targets), both
// i32 [seq_len].
absl::StatusOr<ConvertResult> WindowsToShards(const std::vector<int32_t>& tokens,
                                              int64_t seq_len, int64_t first,
                                              int64_t count, int32_t num_classes,
                                              const ShardOutput& out) {
  const int64_t window = seq_len + 1;
  v1::DatasetInfo info;
  info.set_name(out.name);
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_feature_spec()->add_shape(seq_len);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_label_spec()->add_shape(seq_len);
  info.set_num_classes(num_classes);
  return WriteShards(out, info, count, [&](int64_t i, std::string* rec) {
    const int32_t* w = tokens.data() + (first + i) * window;
    rec->resize(2 * seq_len * 4);
    std::memcpy(rec->data(), w, seq_len * 4);
    std::memcpy(rec->data() + seq_len * 4, w + 1, seq_len * 4);
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<ConvertResult> IdxToShards(const std::string& images_path,
                                          const std::string& labels_path,
                                          const ShardOutput& out) {
  ASSIGN_OR_RETURN(auto ds, data::OpenIdxDataset(out.name, images_path,
                                                       labels_path));
  const int64_t fb = ds->feature_bytes();
  const int64_t lb = ds->label_bytes();
  return WriteShards(out, ds->info(), ds->num_samples(),
                     [&](int64_t i, std::string* rec) {
                       rec->resize(fb + lb);
                       uint8_t* p = reinterpret_cast<uint8_t*>(rec->data());
                       return ds->ReadSample(i, p, p + fb);
                     });
}

absl::StatusOr<ConvertResult> TokensToShards(const std::string& tokens_path,
                                             TokenType type, int64_t seq_len,
                                             const ShardOutput& out) {
  if (seq_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len is ", seq_len, "; it must be > 0"));
  }
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(tokens_path));
  const int64_t width = type == TokenType::kU16 ? 2 : 4;
  if (bytes.size() % width != 0) {
    return absl::DataLossError(absl::StrCat(
        tokens_path, ": size ", bytes.size(), " is not a multiple of the ",
        width, "-byte token; truncated at offset ",
        bytes.size() - bytes.size() % width));
  }
  const int64_t num_tokens = bytes.size() / width;
  std::vector<int32_t> tokens(num_tokens);
  for (int64_t i = 0; i < num_tokens; ++i) {
    if (type == TokenType::kU16) {
      uint16_t t;
      std::memcpy(&t, bytes.data() + 2 * i, 2);
      tokens[i] = t;
    } else {
      std::memcpy(&tokens[i], bytes.data() + 4 * i, 4);
    }
  }
  const int64_t n = num_tokens / (seq_len + 1);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        tokens_path, ": ", num_tokens, " tokens do not fill one window of ",
        seq_len + 1, " (seq_len + 1)"));
  }
  int32_t max_token = 0;
  for (int32_t t : tokens) max_token = std::max(max_token, t);
  // num_classes: the vocabulary seen.
  ASSIGN_OR_RETURN(ConvertResult result,
                   WindowsToShards(tokens, seq_len, 0, n, max_token + 1, out));
  result.dropped_tokens = num_tokens - n * (seq_len + 1);
  return result;
}

absl::StatusOr<TextResult> TextToShards(const std::vector<std::string>& text_paths,
                                        const TextOptions& options,
                                        const ShardOutput& train_out,
                                        const ShardOutput& eval_out) {
  if (options.seq_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len is ", options.seq_len, "; it must be > 0"));
  }
  if (!(options.eval_fraction > 0 && options.eval_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_fraction is ", options.eval_fraction,
                     "; it must be in (0, 1), e.g. 0.05"));
  }
  if (text_paths.empty()) {
    return absl::InvalidArgumentError("no text files given; name at least one");
  }
  if (train_out.out_dir == eval_out.out_dir) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train and eval shards both go to ", train_out.out_dir,
        "; give them different directories (each directory is one dataset)"));
  }
  std::string text;
  for (const std::string& path : text_paths) {
    ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
    text += bytes;
  }
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    tokens[i] = static_cast<unsigned char>(text[i]);
  }
  const int64_t window = options.seq_len + 1;
  const int64_t n = static_cast<int64_t>(tokens.size()) / window;
  const int64_t num_eval =
      std::max<int64_t>(1, std::llround(n * options.eval_fraction));
  if (n - num_eval < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text (", text.size(), " bytes in ", text_paths.size(),
        " file(s)) makes ", n, " window(s) of ", window,
        " bytes (seq_len + 1); a train and an eval set need at least 2: give "
        "more text or a shorter seq_len"));
  }
  TextResult result;
  result.bytes = static_cast<int64_t>(text.size());
  ASSIGN_OR_RETURN(result.train, WindowsToShards(tokens, options.seq_len, 0,
                                                 n - num_eval, kByteVocab, train_out));
  ASSIGN_OR_RETURN(result.eval, WindowsToShards(tokens, options.seq_len, n - num_eval,
                                                num_eval, kByteVocab, eval_out));
  result.train.dropped_tokens = static_cast<int64_t>(tokens.size()) - n * window;
  return result;
}

absl::StatusOr<std::vector<std::string>> TextFilesIn(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
    }
    return absl::UnavailableError(
        absl::StrCat(dir, ": cannot list: ", std::strerror(errno)));
  }
  std::vector<std::string> files;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || absl::EndsWith(name, ".dat")) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(path);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        dir, ": no text files here (regular files other than *.dat)"));
  }
  return files;
}

absl::StatusOr<ConvertResult> SyntheticShards(int64_t num_records,
                                              int64_t record_bytes,
                                              uint64_t seed,
                                              const ShardOutput& out) {
  if (record_bytes <= 0) {
    return absl::InvalidArgumentError("record_bytes must be > 0");
  }
  v1::DatasetInfo info;
  info.set_name(out.name);
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
  info.mutable_feature_spec()->add_shape(record_bytes);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  info.set_num_classes(10);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  return WriteShards(out, info, num_records, [&](int64_t i, std::string* rec) {
    rec->resize(record_bytes + 4);
    for (int64_t k = 0; k < record_bytes; k += 8) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      std::memcpy(rec->data() + k, &state, std::min<int64_t>(8, record_bytes - k));
    }
    const int32_t label = static_cast<int32_t>(i % 10);
    std::memcpy(rec->data() + record_bytes, &label, 4);
    return absl::OkStatus();
  });
}

}  // namespace convert
}  // namespace tandem
