#include "services/worker/evaluator.h"

#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

std::string FormatEvalLine(const EvalResult& r, const std::string& when, InputSpec::Kind kind) {
  if (kind == InputSpec::Kind::kTokens) {
    return absl::StrFormat("%s eval loss %.4f token accuracy %.4f (%d sequences)", when, r.loss,
                           r.accuracy, static_cast<long long>(r.samples));
  }
  return absl::StrFormat("%s test accuracy %.4f (%d samples)", when, r.accuracy,
                         static_cast<long long>(r.samples));
}

Evaluator::~Evaluator() {
  if (device_predictions_ != nullptr) backend_->Free(device_predictions_);
}

absl::StatusOr<EvalResult> Evaluator::Run(Generation& g) {
  EvalResult result;
  if (o_.dataset.empty() || o_.samples == 0) return result;
  // Evaluation mode (BatchNorm's running statistics, no dropout, no graph)
  // until this returns, however it returns.
  struct EvalMode {
    nn::Model* m;
    ~EvalMode() { m->SetTraining(true); }
  } eval_mode{model_};
  model_->SetTraining(false);
  data::PrefetchOptions po;
  po.servers = o_.data_servers;
  po.metrics = o_.metrics;
  v1::StreamBatchesRequest& r = po.request;
  r.set_dataset(o_.dataset);
  r.set_global_batch_size(int64_t{o_.batch_size} * g.world());
  r.set_rank(g.rank());
  r.set_world_size(g.world());
  r.set_remainder(v1::SHORT_LAST);
  r.set_shuffle(false);
  r.set_normalize_to_f32(o_.normalize_to_f32);
  const int64_t gb = r.global_batch_size();
  r.set_max_batches((o_.samples + gb - 1) / gb);
  ASSIGN_OR_RETURN(std::unique_ptr<data::PrefetchClient> client, data::PrefetchClient::Start(po));
  const int classes = model_->num_classes();
  const int64_t rows_per_sample = model_->rows_per_sample();
  const int64_t max_rows = int64_t{o_.batch_size} * rows_per_sample;
  predictions_.resize(max_rows);
  if (!backend_->host_accessible() && device_predictions_ == nullptr) {
    ASSIGN_OR_RETURN(void* p, backend_->AllocateRaw(max_rows * sizeof(int32_t)));
    device_predictions_ = static_cast<int32_t*>(p);
  }
  // correct, counted (samples or tokens), loss sum, samples
  float sums[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < r.max_batches(); ++b) {
    ASSIGN_OR_RETURN(const data::HostBatch* hb, client->Next());
    if (hb->size() == 0) {
      // zero3 gathers each layer collectively: a rank without samples in
      // this batch still takes part in every layer's gather.
      if (tensor::ParamHook* hook = model_->param_hook(); hook != nullptr) {
        for (const auto& [lo, hi] : model_->param_hook_ranges()) {
          RETURN_IF_ERROR(hook->Gather(lo, hi, tensor::ParamPass::kForward));
          hook->Release(lo, hi, tensor::ParamPass::kForward);
        }
      }
      continue;
    }
    ASSIGN_OR_RETURN(nn::Batch batch, stager_->Stage(*hb));
    RETURN_IF_ERROR(model_->Forward(batch));
    const int rows = static_cast<int>(batch.size * rows_per_sample);
    if (device_predictions_ != nullptr) {
      backend_->ArgmaxRows(rows, classes, model_->probs(), device_predictions_);
      RETURN_IF_ERROR(backend_->CopyToHost(predictions_.data(), device_predictions_,
                                           rows * sizeof(int32_t)));
    } else {
      backend_->ArgmaxRows(rows, classes, model_->probs(), predictions_.data());
    }
    float loss = 0;
    RETURN_IF_ERROR(backend_->CopyToHost(&loss, model_->loss(), sizeof(float)));
    const int32_t* labels = stager_->host_labels();
    float counted = 0;
    for (int i = 0; i < rows; ++i) {
      if (labels[i] < 0) continue;
      counted += 1.f;
      sums[0] += predictions_[i] == labels[i] ? 1.f : 0.f;
    }
    sums[1] += counted;
    sums[2] += loss * counted;  // the model's loss is the mean over counted rows
    sums[3] += static_cast<float>(batch.size);
  }
  RETURN_IF_ERROR(g.ctl->AllReduce(sums, 4, ReduceOp::kSum));
  result.samples = static_cast<int64_t>(sums[3]);
  result.accuracy = sums[1] > 0 ? sums[0] / sums[1] : 0;
  result.loss = sums[1] > 0 ? sums[2] / sums[1] : 0;
  return result;
}

}  // namespace worker
}  // namespace tandem
