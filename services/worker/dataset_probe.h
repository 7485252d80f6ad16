// Dataset probe: asks the data servers for the training (and evaluation)
// dataset's description and checks that it fits the model before a single
// batch is streamed (common/nn/dataset_fit.h): an MLP needs u8 / f32
// features of its input width and int32 class labels; a GPT needs int32
// token windows of its context length with int32 next-token labels.
//
//   ProbeOptions p;  p.data_servers = o.data_servers;  p.dataset = "fashion-mnist/train";
//   ASSIGN_OR_RETURN(DatasetProbe d, ProbeDatasets(p, spec));
//   // d.inputs, d.train_samples, d.eval_samples
//
// Thread-safe (no shared state). Failure: UNAVAILABLE when no data server
// answers after bounded retries; NOT_FOUND for a dataset that is not served
// (listing what is); INVALID_ARGUMENT when dataset and model do not fit,
// saying which width / length to use.
#ifndef TANDEM_SERVICES_WORKER_DATASET_PROBE_H_
#define TANDEM_SERVICES_WORKER_DATASET_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset_inputs.h"
#include "common/nn/model_spec.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace worker {

// What one sample of the dataset is, as the model sees it.
struct InputSpec {
  enum class Kind { kFeatures, kTokens };
  Kind kind = Kind::kFeatures;
  int64_t width = 0;              // input elements per sample (features or tokens)
  int64_t labels_per_sample = 1;  // 1 (a class) or the context length
  bool normalize_to_f32 = false;  // ask the data server to turn u8 into f32
  int num_classes = 0;            // classes (dense) or vocabulary (tokens)
  // The typed description (nn::Batch's typed view): the dtype the inputs
  // arrive in (f32 after normalisation, else the dataset's), the per-sample
  // input shape (product = width) and label shape. Unset (UNSPECIFIED,
  // empty) means f32 features / i32 tokens of shape {width}.
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> sample_shape;
  std::vector<int64_t> label_shape;
};

struct ProbeOptions {
  std::vector<std::string> data_servers;  // "host:port", at least one
  std::string dataset;                    // required
  std::string eval_dataset;               // empty: none
  int connect_attempts = 12;
};

struct DatasetProbe {
  InputSpec inputs;
  int64_t train_samples = 0;
  int64_t eval_samples = 0;   // 0 when there is no eval dataset
};

// The InputSpec of a classified dataset: inputs as stored, or u8 features
// asked for as f32 in [0, 1] when `normalize_to_f32` (what the built-in
// models need; a model that takes any dtype passes false).
InputSpec InputSpecFor(const data::DatasetInputs& in, bool normalize_to_f32);

// Checks one dataset's description against the model (pure; tested alone):
// common/data/dataset_inputs.h's classification and common/nn/dataset_fit.h's
// fit check, as the worker's InputSpec.
absl::StatusOr<InputSpec> MatchDataset(const v1::DatasetInfo& info, const nn::ModelSpec& spec);

absl::StatusOr<DatasetProbe> ProbeDatasets(const ProbeOptions& options,
                                           const nn::ModelSpec& spec);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_DATASET_PROBE_H_
