#include "services/worker/dataset_probe.h"

#include "absl/strings/str_cat.h"
#include "common/data/dataset_info_client.h"
#include "common/data/dataset_inputs.h"
#include "common/nn/dataset_fit.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

InputSpec InputSpecFor(const data::DatasetInputs& in, bool normalize_to_f32) {
  InputSpec s;
  s.normalize_to_f32 = normalize_to_f32 && in.feature_dtype == v1::DTYPE_U8;
  s.dtype = s.normalize_to_f32 ? v1::DTYPE_F32 : in.feature_dtype;
  s.sample_shape = in.sample_shape;
  s.label_shape = in.label_shape;
  s.num_classes = in.num_classes;
  if (in.kind == data::InputKind::kTokens) {
    s.kind = InputSpec::Kind::kTokens;
    s.width = in.context;
    s.labels_per_sample = in.context;
  } else {
    s.kind = InputSpec::Kind::kFeatures;
    s.width = in.sample_elements;
    s.labels_per_sample = 1;
  }
  return s;
}

absl::StatusOr<InputSpec> MatchDataset(const v1::DatasetInfo& info, const nn::ModelSpec& spec) {
  ASSIGN_OR_RETURN(data::DatasetInputs in, data::ClassifyDataset(info));
  RETURN_IF_ERROR(nn::CheckModelFitsDataset(spec, in));
  return InputSpecFor(in, in.normalize_to_f32);
}

absl::StatusOr<DatasetProbe> ProbeDatasets(const ProbeOptions& o, const nn::ModelSpec& spec) {
  RetryOptions retry;
  retry.max_attempts = o.connect_attempts;
  retry.call_timeout = absl::Seconds(5);
  retry.wait_for_ready = false;  // a refused connection fails the attempt at once
  DatasetProbe p;
  absl::StatusOr<v1::DatasetInfo> train = data::FetchDatasetInfo(o.data_servers, o.dataset, retry);
  if (absl::IsUnavailable(train.status()) || absl::IsDeadlineExceeded(train.status())) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach a data server: ", train.status().message()));
  }
  if (!train.ok()) return train.status();
  ASSIGN_OR_RETURN(p.inputs, MatchDataset(*train, spec));
  p.train_samples = train->num_samples();
  if (!o.eval_dataset.empty()) {
    ASSIGN_OR_RETURN(v1::DatasetInfo eval,
                     data::FetchDatasetInfo(o.data_servers, o.eval_dataset, retry));
    ASSIGN_OR_RETURN(InputSpec e, MatchDataset(eval, spec));
    if (e.kind != p.inputs.kind || e.dtype != p.inputs.dtype ||
        e.sample_shape != p.inputs.sample_shape || e.label_shape != p.inputs.label_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "eval dataset '", o.eval_dataset, "' has other samples than '", o.dataset,
          "' (features ", data::DescribeSpec(eval.feature_spec()), " vs ",
          data::DescribeSpec(train->feature_spec()), "); convert both with the same shape "
          "and dtype"));
    }
    p.eval_samples = eval.num_samples();
  }
  return p;
}

}  // namespace worker
}  // namespace tandem
