// Datasets the data-shard server serves (and tools read): fixed-size
// samples, each a features block and a label block of a dtype and per-sample
// shape given by a tandem.v1.DatasetInfo, the dataset's description (feature
// dtype and shape, label dtype and shape, number of classes).
//
// Two backings:
//  - IDX (MNIST / Fashion-MNIST): "<prefix>-images-idx3-ubyte.gz" and
//    "<prefix>-labels-idx1-ubyte.gz", loaded into memory at open. Features
//    are u8 [rows, cols]; labels are widened from u8 to i32 [] so every
//    dataset hands out i32 class labels.
//  - record shards (common/data/record_shard.h): one or more files whose
//    metadata is the serialized DatasetInfo (EncodeShardMetadata) and whose
//    records are features bytes followed by label bytes. Memory-mapped.
//    Feature dtypes: f32, u8, i32, i64 (tandem convert writes these); the
//    per-sample shape has at most kMaxSampleRank dimensions.
//
//   ASSIGN_OR_RETURN(auto ds, OpenDataset("fashion-mnist/train",
//       "/usr/share/datasets/fashion-mnist/train"));
//   std::vector<uint8_t> f(ds->feature_bytes()), l(ds->label_bytes());
//   RETURN_IF_ERROR(ds->ReadSample(17, f.data(), l.data()));
//
// Thread-safety: immutable after open; ReadSample may be called from many
// threads. Failures: NOT_FOUND for missing files, DATA_LOSS / INVALID_ARGUMENT
// naming the file and offset for corrupt ones, DATA_LOSS from ReadSample for
// a record whose checksum or size is wrong.
#ifndef TANDEM_COMMON_DATA_DATASET_H_
#define TANDEM_COMMON_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace data {

// Most dimensions a sample's features may have (nn::Batch carries the
// per-sample shape in a fixed array of this size).
inline constexpr int kMaxSampleRank = 7;

// Bytes per element of `dtype`, 0 for DTYPE_UNSPECIFIED.
int64_t DTypeSize(v1::DType dtype);
// Bytes of one sample of `spec` (dtype and per-sample shape).
int64_t SpecBytes(const v1::Tensor& spec);

class Dataset {
 public:
  virtual ~Dataset() = default;

  // name, num_samples, feature/label specs, num_classes.
  virtual const v1::DatasetInfo& info() const = 0;
  // Copies sample `index`'s features (feature_bytes()) and label
  // (label_bytes()) to the destinations. index must be in range.
  virtual absl::Status ReadSample(int64_t index, uint8_t* features,
                                  uint8_t* label) const = 0;

  int64_t num_samples() const { return info().num_samples(); }
  int64_t feature_bytes() const { return SpecBytes(info().feature_spec()); }
  int64_t label_bytes() const { return SpecBytes(info().label_spec()); }
};

absl::StatusOr<std::unique_ptr<Dataset>> OpenIdxDataset(
    const std::string& name, const std::string& images_path,
    const std::string& labels_path);

absl::StatusOr<std::unique_ptr<Dataset>> OpenShardDataset(
    const std::string& name, const std::vector<std::string>& shard_paths);

// `path` is a directory of *.tshard files (sorted by name), one .tshard
// file, or an IDX prefix such as /usr/share/datasets/fashion-mnist/train.
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const std::string& name,
                                                     const std::string& path);

// The description of the dataset OpenDataset(name, path) would open,
// without loading its samples: shards are mapped and their indexes checked;
// of an IDX pair only the image header and the labels are read. Same errors
// as OpenDataset.
absl::StatusOr<v1::DatasetInfo> DescribeDataset(const std::string& name,
                                                const std::string& path);

// The metadata stored in each shard of a dataset: `info` with num_samples
// cleared and name kept (the server names datasets by its flags).
std::string EncodeShardMetadata(const v1::DatasetInfo& info);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_DATASET_H_
