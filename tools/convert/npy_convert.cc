#include "tools/convert/npy_convert.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/dataset.h"
#include "common/data/npy.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace convert {
namespace {

v1::DType ToDType(data::NpyDType t) {
  switch (t) {
    case data::NpyDType::kFloat32: return v1::DTYPE_F32;
    case data::NpyDType::kUInt8: return v1::DTYPE_U8;
    case data::NpyDType::kInt32: return v1::DTYPE_I32;
    case data::NpyDType::kInt64: return v1::DTYPE_I64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

// One read and checked pair: features as stored, labels widened to int32.
struct Samples {
  data::NpyArray features;
  std::vector<int32_t> labels;
  std::vector<int64_t> sample_shape;
  int32_t max_label = 0;
};

absl::StatusOr<std::vector<int32_t>> CheckedLabels(const data::NpyArray& y,
                                                   const std::string& path) {
  if (y.dtype != data::NpyDType::kInt32 && y.dtype != data::NpyDType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": labels must be integer class indices (int32 or int64), not ",
        data::NpyDTypeName(y.dtype), "; save Y.astype(np.int64)"));
  }
  if (y.shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": labels must be a 1-D array of class indices, not shape ", Shape(y.shape)));
  }
  std::vector<int32_t> out(y.shape[0]);
  for (int64_t i = 0; i < y.shape[0]; ++i) {
    int64_t v;
    if (y.dtype == data::NpyDType::kInt32) {
      int32_t v32;
      std::memcpy(&v32, y.data.data() + 4 * i, 4);
      v = v32;
    } else {
      std::memcpy(&v, y.data.data() + 8 * i, 8);
    }
    if (v < 0 || v > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": label ", v, " at index ", i, " is not a class index (0 <= label < 2^30)"));
    }
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

absl::StatusOr<Samples> ReadPair(const NpyPair& pair) {
  Samples s;
  ASSIGN_OR_RETURN(s.features, data::ReadNpyFile(pair.features));
  ASSIGN_OR_RETURN(data::NpyArray y, data::ReadNpyFile(pair.labels));
  const std::vector<int64_t>& shape = s.features.shape;
  if (shape.empty() || shape[0] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        pair.features, ": features of shape ", Shape(shape),
        " hold no samples; the first dimension counts the samples"));
  }
  if (static_cast<int>(shape.size()) - 1 > data::kMaxSampleRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        pair.features, ": samples of shape ", Shape({shape.begin() + 1, shape.end()}), " have ",
        shape.size() - 1, " dimensions; at most ", data::kMaxSampleRank, " are supported"));
  }
  s.sample_shape.assign(shape.begin() + 1, shape.end());
  ASSIGN_OR_RETURN(s.labels, CheckedLabels(y, pair.labels));
  if (static_cast<int64_t>(s.labels.size()) != shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        pair.labels, " holds ", s.labels.size(), " labels but ", pair.features, " holds ",
        shape[0], " samples (shape ", Shape(shape), "); give one label per sample"));
  }
  for (int32_t l : s.labels) s.max_label = std::max(s.max_label, l);
  return s;
}

absl::StatusOr<ConvertResult> WriteSamples(const Samples& s, const v1::DatasetInfo& info,
                                           const ShardOutput& out) {
  if (mkdir(out.out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", out.out_dir, ": ", std::strerror(errno)));
  }
  const int64_t fb = data::SpecBytes(info.feature_spec());
  return WriteShards(out, info, s.features.shape[0], [&](int64_t i, std::string* rec) {
    rec->assign(s.features.data, i * fb, fb);
    rec->append(reinterpret_cast<const char*>(&s.labels[i]), 4);
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<NpyResult> NpyToShards(const NpySources& src, const ShardOutput& out) {
  if (src.train.features.empty() || src.train.labels.empty()) {
    return absl::InvalidArgumentError("--mode=npy needs --features=X.npy and --labels=Y.npy");
  }
  const bool has_eval = !src.eval.features.empty() || !src.eval.labels.empty();
  if (has_eval && (src.eval.features.empty() || src.eval.labels.empty())) {
    return absl::InvalidArgumentError(
        "give both --eval_features and --eval_labels, or neither");
  }
  ASSIGN_OR_RETURN(Samples train, ReadPair(src.train));
  Samples eval;
  if (has_eval) {
    ASSIGN_OR_RETURN(eval, ReadPair(src.eval));
    if (eval.features.dtype != train.features.dtype || eval.sample_shape != train.sample_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          src.eval.features, ": eval samples are ", data::NpyDTypeName(eval.features.dtype),
          " ", Shape(eval.sample_shape), " but train samples (", src.train.features, ") are ",
          data::NpyDTypeName(train.features.dtype), " ", Shape(train.sample_shape),
          "; both must have the same dtype and sample shape"));
    }
  }
  NpyResult r;
  r.info.set_name(out.name);
  r.info.mutable_feature_spec()->set_dtype(ToDType(train.features.dtype));
  for (int64_t d : train.sample_shape) r.info.mutable_feature_spec()->add_shape(d);
  r.info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  r.info.set_num_classes(std::max(train.max_label, eval.max_label) + 1);
  ShardOutput train_out = out, eval_out = out;
  train_out.out_dir = out.out_dir + "/train";
  eval_out.out_dir = out.out_dir + "/eval";
  ASSIGN_OR_RETURN(r.train, WriteSamples(train, r.info, train_out));
  if (has_eval) {
    ASSIGN_OR_RETURN(r.eval, WriteSamples(eval, r.info, eval_out));
  }
  r.info.set_num_samples(r.train.records);
  return r;
}

}  // namespace convert
}  // namespace tandem
