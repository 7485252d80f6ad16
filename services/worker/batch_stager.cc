#include "services/worker/batch_stager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/dataset.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

namespace {

static_assert(nn::kMaxSampleRank == data::kMaxSampleRank,
              "nn::Batch's sample shape must hold every servable sample");

absl::StatusOr<nn::InputDType> ToInputDType(v1::DType t) {
  switch (t) {
    case v1::DTYPE_F32: return nn::InputDType::kFloat32;
    case v1::DTYPE_U8: return nn::InputDType::kUInt8;
    case v1::DTYPE_I32: return nn::InputDType::kInt32;
    case v1::DTYPE_I64: return nn::InputDType::kInt64;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs of dtype ", v1::DType_Name(t), " cannot be staged; datasets hold f32, u8, "
          "i32 or i64 features"));
  }
}

absl::StatusOr<nn::SampleShape> ToSampleShape(const std::vector<int64_t>& dims) {
  if (static_cast<int>(dims.size()) > nn::kMaxSampleRank) {
    return absl::InvalidArgumentError(absl::StrCat("samples of ", dims.size(),
                                                   " dimensions; at most ",
                                                   nn::kMaxSampleRank, " are supported"));
  }
  nn::SampleShape s;
  s.rank = static_cast<int>(dims.size());
  for (int i = 0; i < s.rank; ++i) s.dims[i] = dims[i];
  return s;
}

// Fills the typed description's defaults (f32 features / i32 tokens of
// shape {width}) and checks it against width and labels_per_sample.
absl::StatusOr<InputSpec> Complete(InputSpec in) {
  const bool tokens = in.kind == InputSpec::Kind::kTokens;
  if (in.dtype == v1::DTYPE_UNSPECIFIED) in.dtype = tokens ? v1::DTYPE_I32 : v1::DTYPE_F32;
  if (in.sample_shape.empty() && in.width != 1) in.sample_shape = {in.width};
  if (in.label_shape.empty() && in.labels_per_sample > 1) {
    in.label_shape = {in.labels_per_sample};
  }
  int64_t elements = 1, labels = 1;
  for (int64_t d : in.sample_shape) elements *= d;
  for (int64_t d : in.label_shape) labels *= d;
  if (elements != in.width || labels != in.labels_per_sample) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchStager: sample shape [", absl::StrJoin(in.sample_shape, ","), "] / label shape [",
        absl::StrJoin(in.label_shape, ","), "] do not hold ", in.width, " inputs and ",
        in.labels_per_sample, " labels"));
  }
  if (tokens && in.dtype != v1::DTYPE_I32) {
    return absl::InvalidArgumentError("BatchStager: token windows are int32");
  }
  return in;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchStager>> BatchStager::Create(kernels::Backend* backend,
                                                                 const InputSpec& spec,
                                                                 int max_batch) {
  if (backend == nullptr || max_batch < 1 || spec.width < 1 || spec.labels_per_sample < 1) {
    return absl::InvalidArgumentError("BatchStager: needs a backend, max_batch >= 1 and a "
                                      "non-empty sample shape");
  }
  ASSIGN_OR_RETURN(const InputSpec inputs, Complete(spec));
  std::unique_ptr<BatchStager> s(new BatchStager(backend, inputs, max_batch));
  ASSIGN_OR_RETURN(s->typed_.inputs_dtype, ToInputDType(inputs.dtype));
  ASSIGN_OR_RETURN(s->typed_.sample_shape, ToSampleShape(inputs.sample_shape));
  ASSIGN_OR_RETURN(s->typed_.label_shape, ToSampleShape(inputs.label_shape));
  s->input_element_bytes_ = data::DTypeSize(inputs.dtype);
  if (!backend->host_accessible()) {
    ASSIGN_OR_RETURN(s->device_inputs_, backend->AllocateRaw(int64_t{max_batch} * inputs.width *
                                                             s->input_element_bytes_));
    ASSIGN_OR_RETURN(void* l, backend->AllocateRaw(int64_t{max_batch} * inputs.labels_per_sample * 4));
    s->device_labels_ = static_cast<int32_t*>(l);
  }
  return s;
}

BatchStager::~BatchStager() {
  if (device_inputs_ != nullptr) backend_->Free(device_inputs_);
  if (device_labels_ != nullptr) backend_->Free(device_labels_);
}

absl::StatusOr<nn::Batch> BatchStager::Stage(const data::HostBatch& hb) {
  const bool tokens = inputs_.kind == InputSpec::Kind::kTokens;
  if (hb.feature_dtype != inputs_.dtype || hb.label_dtype != v1::DTYPE_I32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data server sent a batch of ", v1::DType_Name(hb.feature_dtype), " inputs and ",
        v1::DType_Name(hb.label_dtype), " labels; the dataset's description promised ",
        v1::DType_Name(inputs_.dtype), tokens ? " tokens" : " features", " with DTYPE_I32 labels"));
  }
  const int64_t n = hb.size();
  const int64_t input_bytes = n * inputs_.width * input_element_bytes_;
  const int64_t label_bytes = n * inputs_.labels_per_sample * 4;
  if (static_cast<int64_t>(hb.features.size()) != input_bytes ||
      static_cast<int64_t>(hb.labels.size()) != label_bytes) {
    return absl::DataLossError(absl::StrCat("batch of ", n, " samples has ", hb.features.size(),
                                            " input bytes and ", hb.labels.size(),
                                            " label bytes; expected ", input_bytes, " and ",
                                            label_bytes));
  }
  if (n > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", n, " samples exceeds the batch size ", max_batch_));
  }
  nn::Batch b = typed_;
  b.size = static_cast<int>(n);
  host_labels_ = reinterpret_cast<const int32_t*>(hb.labels.data());
  const void* inputs = hb.features.data();
  const int32_t* labels = host_labels_;
  if (device_inputs_ != nullptr) {
    // Stream-ordered and not waited for (see the header): the prefetch
    // buffers may be reused as soon as these return.
    RETURN_IF_ERROR(backend_->CopyToDevice(device_inputs_, hb.features.data(), input_bytes));
    RETURN_IF_ERROR(backend_->CopyToDevice(device_labels_, hb.labels.data(), label_bytes));
    inputs = device_inputs_;
    labels = device_labels_;
  }
  b.inputs = inputs;
  if (tokens) {
    b.tokens = static_cast<const int32_t*>(inputs);
  } else if (inputs_.dtype == v1::DTYPE_F32) {
    b.features = static_cast<const float*>(inputs);
  }
  b.labels = labels;
  return b;
}

}  // namespace worker
}  // namespace tandem
