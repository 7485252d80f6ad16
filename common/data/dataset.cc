#include "common/data/dataset.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/data/idx.h"
#include "common/data/record_shard.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace data {
namespace {

class IdxDataset final : public Dataset {
 public:
  IdxDataset(v1::DatasetInfo info, IdxArray images,
             std::vector<int32_t> labels)
      : info_(std::move(info)),
        images_(std::move(images)),
        labels_(std::move(labels)),
        item_bytes_(images_.item_bytes()) {}

  const v1::DatasetInfo& info() const override { return info_; }

  absl::Status ReadSample(int64_t index, uint8_t* features,
                          uint8_t* label) const override {
    std::memcpy(features, images_.data.data() + index * item_bytes_,
                item_bytes_);
    std::memcpy(label, &labels_[index], sizeof(int32_t));
    return absl::OkStatus();
  }

 private:
  v1::DatasetInfo info_;
  IdxArray images_;
  std::vector<int32_t> labels_;
  int64_t item_bytes_;
};

class ShardDataset final : public Dataset {
 public:
  ShardDataset(v1::DatasetInfo info,
               std::vector<std::unique_ptr<RecordShardReader>> shards)
      : info_(std::move(info)), shards_(std::move(shards)) {
    int64_t total = 0;
    for (const auto& s : shards_) {
      starts_.push_back(total);
      total += s->num_records();
    }
    info_.set_num_samples(total);
    feature_bytes_ = SpecBytes(info_.feature_spec());
    label_bytes_ = SpecBytes(info_.label_spec());
  }

  const v1::DatasetInfo& info() const override { return info_; }

  absl::Status ReadSample(int64_t index, uint8_t* features,
                          uint8_t* label) const override {
    const size_t shard =
        std::upper_bound(starts_.begin(), starts_.end(), index) -
        starts_.begin() - 1;
    const RecordShardReader& r = *shards_[shard];
    const int64_t local = index - starts_[shard];
    ASSIGN_OR_RETURN(absl::string_view rec, r.Read(local));
    if (static_cast<int64_t>(rec.size()) != feature_bytes_ + label_bytes_) {
      return absl::DataLossError(absl::StrCat(
          r.path(), ": record ", local, " has ", rec.size(),
          " bytes; the dataset's specs need ", feature_bytes_ + label_bytes_));
    }
    std::memcpy(features, rec.data(), feature_bytes_);
    std::memcpy(label, rec.data() + feature_bytes_, label_bytes_);
    return absl::OkStatus();
  }

 private:
  v1::DatasetInfo info_;
  std::vector<std::unique_ptr<RecordShardReader>> shards_;
  std::vector<int64_t> starts_;
  int64_t feature_bytes_ = 0;
  int64_t label_bytes_ = 0;
};

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int64_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
    case v1::DTYPE_I32:
      return 4;
    case v1::DTYPE_F16:
    case v1::DTYPE_BF16:
      return 2;
    case v1::DTYPE_I64:
      return 8;
    case v1::DTYPE_U8:
    case v1::DTYPE_I8:
      return 1;
    default:
      return 0;
  }
}

int64_t SpecBytes(const v1::Tensor& spec) {
  int64_t n = DTypeSize(spec.dtype());
  for (int64_t d : spec.shape()) n *= d;
  return n;
}

namespace {

// The description of an IDX pair with `images_dims` (read from its header)
// and `labels`; INVALID_ARGUMENT when they do not belong together.
absl::StatusOr<v1::DatasetInfo> IdxInfo(const std::string& name,
                                        const std::string& images_path,
                                        const std::vector<int64_t>& images_dims,
                                        const std::string& labels_path,
                                        const IdxArray& labels) {
  if (images_dims.size() < 2 || images_dims.size() > kMaxSampleRank + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": images need 2..", kMaxSampleRank + 1,
        " dimensions, got ", images_dims.size()));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images_dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": expected ", images_dims[0],
        " labels (one per image of ", images_path, "), got shape with ",
        labels.num_items(), " items"));
  }
  v1::DatasetInfo info;
  info.set_name(name);
  info.set_num_samples(images_dims[0]);
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
  for (size_t i = 1; i < images_dims.size(); ++i) {
    info.mutable_feature_spec()->add_shape(images_dims[i]);
  }
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  int max_label = 0;
  for (uint8_t l : labels.data) max_label = std::max<int>(max_label, l);
  info.set_num_classes(max_label + 1);
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenIdxDataset(
    const std::string& name, const std::string& images_path,
    const std::string& labels_path) {
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  ASSIGN_OR_RETURN(v1::DatasetInfo info,
                   IdxInfo(name, images_path, images.dims, labels_path, labels));
  std::vector<int32_t> wide(labels.data.begin(), labels.data.end());
  return std::unique_ptr<Dataset>(
      new IdxDataset(std::move(info), std::move(images), std::move(wide)));
}

std::string EncodeShardMetadata(const v1::DatasetInfo& info) {
  v1::DatasetInfo copy = info;
  copy.clear_num_samples();
  copy.mutable_feature_spec()->clear_data();
  copy.mutable_label_spec()->clear_data();
  return copy.SerializeAsString();
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenShardDataset(
    const std::string& name, const std::vector<std::string>& shard_paths) {
  if (shard_paths.empty()) {
    return absl::NotFoundError(
        absl::StrCat("dataset ", name, ": no shard files given"));
  }
  std::vector<std::unique_ptr<RecordShardReader>> shards;
  v1::DatasetInfo info;
  for (size_t i = 0; i < shard_paths.size(); ++i) {
    ASSIGN_OR_RETURN(auto reader, RecordShardReader::Open(shard_paths[i]));
    v1::DatasetInfo meta;
    if (!meta.ParseFromArray(reader->metadata().data(),
                             reader->metadata().size()) ||
        SpecBytes(meta.feature_spec()) <= 0 || DTypeSize(meta.label_spec().dtype()) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          shard_paths[i], ": metadata (offset ", kRecordShardHeaderBytes,
          ") is not a tandem DatasetInfo with feature and label specs; write "
          "shards with tandem convert"));
    }
    if (meta.feature_spec().shape_size() > kMaxSampleRank ||
        meta.label_spec().shape_size() > kMaxSampleRank) {
      return absl::InvalidArgumentError(absl::StrCat(
          shard_paths[i], ": samples of ", meta.feature_spec().shape_size(),
          " dimensions; at most ", kMaxSampleRank, " are supported"));
    }
    if (i == 0) {
      info = meta;
    } else if (meta.feature_spec().SerializeAsString() !=
                   info.feature_spec().SerializeAsString() ||
               meta.label_spec().SerializeAsString() !=
                   info.label_spec().SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrCat(
          shard_paths[i], ": feature/label specs differ from those of ",
          shard_paths[0], "; all shards of a dataset must match"));
    }
    shards.push_back(std::move(reader));
  }
  info.set_name(name);
  auto ds = std::unique_ptr<Dataset>(
      new ShardDataset(std::move(info), std::move(shards)));
  if (ds->num_samples() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", name, ": its shards hold no records"));
  }
  return ds;
}

namespace {

// The .tshard files of directory `path`, sorted; NOT_FOUND when none.
absl::StatusOr<std::vector<std::string>> ShardFilesIn(const std::string& path) {
  std::vector<std::string> files;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot list: ",
                                               std::strerror(errno)));
  }
  while (struct dirent* e = readdir(dir)) {
    if (absl::EndsWith(e->d_name, ".tshard")) {
      files.push_back(absl::StrCat(path, "/", e->d_name));
    }
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        path, ": no *.tshard files in this directory; convert data with "
        "`tandem convert` first"));
  }
  return files;
}

// A path that is no directory or shard must be an IDX prefix; when not even
// its images file exists, say what a dataset path may be.
absl::Status CheckIdxPrefix(const std::string& path) {
  struct stat st;
  const std::string images = path + "-images-idx3-ubyte.gz";
  if (stat(images.c_str(), &st) == 0 || stat(path.c_str(), &st) == 0) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      path, ": no such dataset: expected a directory of *.tshard files (tandem convert "
      "writes one), a .tshard file, or an IDX prefix with ", images));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const std::string& name,
                                                     const std::string& path) {
  if (IsDirectory(path)) {
    ASSIGN_OR_RETURN(std::vector<std::string> files, ShardFilesIn(path));
    return OpenShardDataset(name, files);
  }
  if (absl::EndsWith(path, ".tshard")) return OpenShardDataset(name, {path});
  RETURN_IF_ERROR(CheckIdxPrefix(path));
  return OpenIdxDataset(name, path + "-images-idx3-ubyte.gz",
                        path + "-labels-idx1-ubyte.gz");
}

absl::StatusOr<v1::DatasetInfo> DescribeDataset(const std::string& name,
                                                const std::string& path) {
  if (IsDirectory(path) || absl::EndsWith(path, ".tshard")) {
    // Opening shards maps them and checks their indexes: no sample is read.
    ASSIGN_OR_RETURN(auto ds, OpenDataset(name, path));
    return ds->info();
  }
  RETURN_IF_ERROR(CheckIdxPrefix(path));
  const std::string images_path = path + "-images-idx3-ubyte.gz";
  const std::string labels_path = path + "-labels-idx1-ubyte.gz";
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIdxDims(images_path));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  return IdxInfo(name, images_path, dims, labels_path, labels);
}

}  // namespace data
}  // namespace tandem
