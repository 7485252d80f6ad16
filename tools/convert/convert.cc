#include "tools/convert/convert.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/idx.h"
#include "common/data/record_shard.h"
#include "common/status/status_macros.h"
#include "proto/dataserver.pb.h"
#include "services/dataserver/dataset.h"

namespace tandem {
namespace convert {
namespace {

// Writes `n` records produced by `fill(i, &record)` into shards.
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
  const std::string metadata = dataserver::EncodeShardMetadata(info);
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

}  // namespace

absl::StatusOr<ConvertResult> IdxToShards(const std::string& images_path,
                                          const std::string& labels_path,
                                          const ShardOutput& out) {
  ASSIGN_OR_RETURN(auto ds, dataserver::OpenIdxDataset(out.name, images_path,
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
  std::FILE* f = std::fopen(tokens_path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(tokens_path, ": no such file"));
    }
    return absl::UnavailableError(
        absl::StrCat(tokens_path, ": cannot open: ", std::strerror(errno)));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  std::string bytes;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, got);
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
  const int64_t window = seq_len + 1;
  const int64_t n = num_tokens / window;
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        tokens_path, ": ", num_tokens, " tokens do not fill one window of ",
        window, " (seq_len + 1)"));
  }
  v1::DatasetInfo info;
  info.set_name(out.name);
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_feature_spec()->add_shape(seq_len);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  info.mutable_label_spec()->add_shape(seq_len);
  int32_t max_token = 0;
  for (int32_t t : tokens) max_token = std::max(max_token, t);
  info.set_num_classes(max_token + 1);  // the vocabulary seen
  ASSIGN_OR_RETURN(ConvertResult result,
                   WriteShards(out, info, n, [&](int64_t i, std::string* rec) {
                     const int32_t* w = tokens.data() + i * window;
                     rec->resize(2 * seq_len * 4);
                     std::memcpy(rec->data(), w, seq_len * 4);
                     std::memcpy(rec->data() + seq_len * 4, w + 1, seq_len * 4);
                     return absl::OkStatus();
                   }));
  result.dropped_tokens = num_tokens - n * window;
  return result;
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
