// Dataset descriptions for tests: what the data server reports for the two
// named datasets, and a builder for any other.
//
//   const v1::DatasetInfo images = FashionMnistInfo();
//   const v1::DatasetInfo odd = TestDatasetInfo("x", v1::DTYPE_I64, {3}, v1::DTYPE_I32, {}, 4);
//
// Test-only; thread-safe (pure functions).
#ifndef TANDEM_COMMON_DATA_DATASET_INFO_TESTUTIL_H_
#define TANDEM_COMMON_DATA_DATASET_INFO_TESTUTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/dataserver.pb.h"

namespace tandem {
namespace data {

// 100 samples of features `fdtype` `fshape` and labels `ldtype` `lshape`.
inline v1::DatasetInfo TestDatasetInfo(const std::string& name, v1::DType fdtype,
                                       const std::vector<int64_t>& fshape, v1::DType ldtype,
                                       const std::vector<int64_t>& lshape, int classes) {
  v1::DatasetInfo info;
  info.set_name(name);
  info.set_num_samples(100);
  info.mutable_feature_spec()->set_dtype(fdtype);
  for (int64_t d : fshape) info.mutable_feature_spec()->add_shape(d);
  info.mutable_label_spec()->set_dtype(ldtype);
  for (int64_t d : lshape) info.mutable_label_spec()->add_shape(d);
  info.set_num_classes(classes);
  return info;
}

// What the server reports for fashion-mnist: u8 [28,28], 10 classes.
inline v1::DatasetInfo FashionMnistInfo() {
  return TestDatasetInfo("fashion-mnist/train", v1::DTYPE_U8, {28, 28}, v1::DTYPE_I32, {}, 10);
}

// What `tandem convert --mode=text` writes: i32 [128] windows, vocab 256.
inline v1::DatasetInfo FortunesInfo() {
  return TestDatasetInfo("fortunes/train", v1::DTYPE_I32, {128}, v1::DTYPE_I32, {128}, 256);
}

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_DATASET_INFO_TESTUTIL_H_
