// OptimizerMirror: the optimizer a `ps` / `hybrid` worker shows the
// checkpointer. The real optimizer state lives on the shard servers; this
// object has the same name and state buffer names as the optimizer
// make_optimizer builds ("adamw": exp_avg, exp_avg_sq), over the whole
// vector [0, n), so checkpoints of ps / hybrid carry the optimizer state in
// the format every strategy reads (and a job moves between ps / hybrid and
// allreduce / zero*).
//
// Its buffers exist only while a checkpoint is written or restored: state()
// allocates them (n floats each) on first use, the strategy fills them from
// the servers before a write (SyncStateToHost) or sends them to the servers
// after a restore (StateLoaded, then InitShard), and Release() frees them.
// Step() is FAILED_PRECONDITION: the servers step.
//
// Not thread-safe (the trainer thread).
#ifndef TANDEM_COMMON_SYNC_REMOTE_OPTIMIZER_MIRROR_H_
#define TANDEM_COMMON_SYNC_REMOTE_OPTIMIZER_MIRROR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace sync {

class OptimizerMirror final : public optim::Optimizer {
 public:
  // `probe` is an optimizer of the trainer's kind (any range): its name and
  // its state buffers' names are taken.
  OptimizerMirror(optim::Optimizer& probe, int64_t size)
      : Optimizer(optim::ParamRange{0, size}), name_(probe.name()) {
    for (const optim::StateBuffer& b : probe.state()) names_.push_back(b.name);
  }

  absl::Status Step(float*, const float*, int64_t, const optim::StepContext&) override {
    return absl::FailedPreconditionError(
        "ps / hybrid: the shard servers apply the optimizer; the worker's copy only carries "
        "checkpointed state");
  }
  std::string name() const override { return name_; }

  std::vector<optim::StateBuffer> state() override {
    Materialize();
    std::vector<optim::StateBuffer> out;
    for (size_t i = 0; i < names_.size(); ++i) {
      out.push_back({names_[i], absl::MakeSpan(buffers_[i])});
    }
    return out;
  }
  void ResetState() override {
    for (std::vector<float>& b : buffers_) std::fill(b.begin(), b.end(), 0.f);
  }

  const std::vector<std::string>& names() const { return names_; }
  bool materialized() const { return !buffers_.empty() || names_.empty(); }
  void Materialize() {
    if (buffers_.size() == names_.size()) return;
    buffers_.assign(names_.size(), std::vector<float>(range().size(), 0.f));
  }
  float* buffer(size_t i) { return buffers_[i].data(); }
  void Release() { std::vector<std::vector<float>>().swap(buffers_); }
  int64_t held_bytes() const {
    return static_cast<int64_t>(buffers_.size()) * range().size() * int64_t{sizeof(float)};
  }

 private:
  const std::string name_;
  std::vector<std::string> names_;
  std::vector<std::vector<float>> buffers_;  // empty unless materialised
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_OPTIMIZER_MIRROR_H_
