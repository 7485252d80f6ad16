#include "common/data/dataset_inputs.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/dataset.h"

namespace tandem {
namespace data {
namespace {

bool DenseFeatureType(v1::DType t) {
  return t == v1::DTYPE_F32 || t == v1::DTYPE_U8 || t == v1::DTYPE_I32 || t == v1::DTYPE_I64;
}

}  // namespace

std::string DescribeSpec(const v1::Tensor& spec) {
  std::string name = v1::DType_Name(spec.dtype());
  if (absl::StartsWith(name, "DTYPE_")) name = absl::AsciiStrToLower(name.substr(6));
  return absl::StrCat(name, " [", absl::StrJoin(spec.shape(), ","), "]");
}

absl::StatusOr<DatasetInputs> ClassifyDataset(const v1::DatasetInfo& info) {
  const v1::Tensor& f = info.feature_spec();
  const v1::Tensor& l = info.label_spec();
  DatasetInputs in;
  in.num_classes = info.num_classes();
  in.feature_dtype = f.dtype();
  in.sample_shape.assign(f.shape().begin(), f.shape().end());
  in.label_shape.assign(l.shape().begin(), l.shape().end());
  if (f.dtype() == v1::DTYPE_I32 && f.shape_size() == 1 && l.dtype() == v1::DTYPE_I32 &&
      l.shape_size() == 1 && l.shape(0) == f.shape(0) && f.shape(0) > 0) {
    if (in.num_classes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", info.name(), ": token windows without a vocabulary size (num_classes ",
          in.num_classes, "); rewrite it with tandem convert"));
    }
    in.kind = InputKind::kTokens;
    in.context = f.shape(0);
    return in;
  }
  if (DenseFeatureType(f.dtype()) && f.shape_size() <= kMaxSampleRank &&
      l.dtype() == v1::DTYPE_I32 && l.shape_size() == 0) {
    if (in.num_classes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", info.name(), ": class labels without a class count (num_classes ",
          in.num_classes, ")"));
    }
    in.kind = InputKind::kDense;
    in.sample_elements = 1;
    for (int64_t d : f.shape()) in.sample_elements *= d;
    in.normalize_to_f32 = f.dtype() == v1::DTYPE_U8;
    return in;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dataset ", info.name(), " has features ", DescribeSpec(f), " and labels ",
      DescribeSpec(l), "; a model can use f32/u8/i32/i64 features of at most ",
      kMaxSampleRank, " dimensions with i32 [] class labels, or i32 [ctx] tokens with i32 "
      "[ctx] next-token labels"));
}

}  // namespace data
}  // namespace tandem
