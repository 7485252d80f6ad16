#include "services/worker/batch_stager.h"

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<BatchStager>> BatchStager::Create(kernels::Backend* backend,
                                                                 const InputSpec& inputs,
                                                                 int max_batch) {
  if (backend == nullptr || max_batch < 1 || inputs.width < 1 || inputs.labels_per_sample < 1) {
    return absl::InvalidArgumentError("BatchStager: needs a backend, max_batch >= 1 and a "
                                      "non-empty sample shape");
  }
  std::unique_ptr<BatchStager> s(new BatchStager(backend, inputs, max_batch));
  if (!backend->host_accessible()) {
    // Both input kinds are 4-byte elements (f32 features, int32 tokens).
    ASSIGN_OR_RETURN(s->device_inputs_, backend->AllocateRaw(int64_t{max_batch} * inputs.width * 4));
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
  const v1::DType want = tokens ? v1::DTYPE_I32 : v1::DTYPE_F32;
  if (hb.feature_dtype != want || hb.label_dtype != v1::DTYPE_I32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data server sent a batch that is not ", tokens ? "int32 tokens" : "f32 features",
        " with int32 labels (dtypes ", hb.feature_dtype, " and ", hb.label_dtype, ")"));
  }
  const int64_t n = hb.size();
  const int64_t input_bytes = n * inputs_.width * 4;
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
  nn::Batch b;
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
  if (tokens) {
    b.tokens = static_cast<const int32_t*>(inputs);
  } else {
    b.features = static_cast<const float*>(inputs);
  }
  b.labels = labels;
  return b;
}

}  // namespace worker
}  // namespace tandem
