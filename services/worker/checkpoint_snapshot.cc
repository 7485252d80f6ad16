#include "services/worker/checkpoint_snapshot.h"

namespace tandem {
namespace worker {
namespace {

// Resizes `to` to `n` entries, keeping the capacity of those it keeps.
template <typename T>
void Fit(std::vector<T>* to, size_t n) {
  if (to->size() != n) to->resize(n);
}

}  // namespace

void CheckpointSnapshot::Capture(const checkpoint::CheckpointView& v) {
  fingerprint_ = v.model_fingerprint;
  step_ = v.step;
  total_ = v.total_params;
  lo_ = v.range_lo;
  hi_ = v.range_hi;
  params_.assign(v.params.begin(), v.params.end());
  optimizer_name_.assign(v.optimizer_name);
  Fit(&optimizer_state_, v.optimizer_state.size());
  for (size_t i = 0; i < v.optimizer_state.size(); ++i) {
    optimizer_state_[i].first.assign(v.optimizer_state[i].first);
    optimizer_state_[i].second.assign(v.optimizer_state[i].second.begin(),
                                      v.optimizer_state[i].second.end());
  }
  Fit(&blobs_, v.blobs.size());
  for (size_t i = 0; i < v.blobs.size(); ++i) {
    blobs_[i].first.assign(v.blobs[i].first);
    blobs_[i].second.assign(v.blobs[i].second.data(), v.blobs[i].second.size());
  }
}

checkpoint::CheckpointView CheckpointSnapshot::View() const {
  checkpoint::CheckpointView v;
  v.model_fingerprint = fingerprint_;
  v.step = step_;
  v.total_params = total_;
  v.range_lo = lo_;
  v.range_hi = hi_;
  v.params = params_;
  v.optimizer_name = optimizer_name_;
  for (const auto& [name, values] : optimizer_state_) {
    v.optimizer_state.emplace_back(name, absl::MakeConstSpan(values));
  }
  for (const auto& [name, bytes] : blobs_) v.blobs.emplace_back(name, bytes);
  return v;
}

int64_t CheckpointSnapshot::bytes() const {
  int64_t n = static_cast<int64_t>(params_.size() * sizeof(float));
  for (const auto& [name, values] : optimizer_state_) n += values.size() * sizeof(float);
  for (const auto& [name, bytes] : blobs_) n += bytes.size();
  return n;
}

}  // namespace worker
}  // namespace tandem
