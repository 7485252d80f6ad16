#include "services/worker/dataset_probe.h"

#include "absl/strings/str_cat.h"
#include "common/data/dataset_inputs.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::StatusOr<InputSpec> MatchDataset(const v1::DatasetInfo& info, const nn::ModelSpec& spec) {
  ASSIGN_OR_RETURN(data::DatasetInputs in, data::ClassifyDataset(info));
  RETURN_IF_ERROR(data::CheckModelFitsDataset(spec, in));
  InputSpec s;
  s.normalize_to_f32 = in.normalize_to_f32;
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
    if (e.kind != p.inputs.kind || e.width != p.inputs.width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "eval dataset '", o.eval_dataset, "' has other samples than '", o.dataset, "'"));
    }
    p.eval_samples = eval.num_samples();
  }
  return p;
}

}  // namespace worker
}  // namespace tandem
