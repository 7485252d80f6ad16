#include "common/sync/remote/hybrid_ring.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {
namespace {

// The optimizer's buffer called `name` (the mirror and the optimizer come
// from the same make_optimizer, so every name is there).
float* Named(const std::vector<optim::StateBuffer>& buffers, const std::string& name) {
  for (const optim::StateBuffer& b : buffers) {
    if (b.name == name) return b.data.data();
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HybridRing>> HybridRing::Create(const SyncEnv& env, int64_t size) {
  if (size <= 0 || size > env.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hybrid sync: the ring part must be 1..", env.size, " values, got ", size));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> optimizer, env.make_optimizer({0, size}));
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> probe, env.make_optimizer({0, 0}));
  auto whole = std::make_unique<OptimizerMirror>(*probe, env.size);
  std::unique_ptr<HierAllreduce> hier;
  const CommGroups& g = *env.comms;
  if (g.intra != nullptr && g.local_size >= 2 && HierarchicalUnusableReason(g).empty()) {
    ASSIGN_OR_RETURN(hier, HierAllreduce::Create({&g, size}));
  }
  return std::unique_ptr<HybridRing>(
      new HybridRing(env, size, std::move(optimizer), std::move(whole), std::move(hier)));
}

HybridRing::HybridRing(const SyncEnv& env, int64_t size, std::unique_ptr<optim::Optimizer> optimizer,
                       std::unique_ptr<OptimizerMirror> whole, std::unique_ptr<HierAllreduce> hier)
    : world_(env.comms->world.get()),
      params_(env.params),
      grads_(env.grads),
      size_(size),
      nodes_(env.comms->num_nodes),
      optimizer_(std::move(optimizer)),
      whole_(std::move(whole)),
      hier_(std::move(hier)) {}

absl::Status HybridRing::Reduce() {
  const int64_t share = hier_ != nullptr ? hier_->ShareCount(size_) : size_;
  absl::Status s = hier_ != nullptr ? hier_->Run(grads_, size_) : world_->AllReduce(grads_, size_);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("hybrid sync: ring allreduce of the ring part [0, ",
                                               size_, ") on rank ", world_->rank(), ": ",
                                               s.message()));
  }
  if (nodes_ > 1) inter_node_bytes_ += 2 * (nodes_ - 1) * share * int64_t{sizeof(float)} / nodes_;
  return absl::OkStatus();
}

absl::Status HybridRing::Step(const optim::StepContext& ctx, float step_scale) {
  // allreduce's scale (step_owned_shard.h): the context's x the step's / world.
  optim::StepContext c = ctx;
  c.grad_scale = static_cast<float>(static_cast<double>(ctx.grad_scale) *
                                    static_cast<double>(step_scale) / world_->world_size());
  absl::Status s = optimizer_->Step(params_, grads_, size_, c);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("hybrid sync: the optimizer step of the ring part "
                                               "at step ", ctx.step, ": ", s.message()));
  }
  return absl::OkStatus();
}

void HybridRing::FillForCheckpoint(OptimizerMirror* servers) {
  whole_->Materialize();
  const std::vector<optim::StateBuffer> mine = optimizer_->state();
  const int64_t rest = whole_->range().size() - size_;
  for (size_t i = 0; i < whole_->names().size(); ++i) {
    float* out = whole_->buffer(i);
    const float* ring = Named(mine, whole_->names()[i]);
    if (ring != nullptr) std::memcpy(out, ring, size_ * sizeof(float));
    if (servers->materialized() && i < servers->names().size()) {
      std::memcpy(out + size_, servers->buffer(i), rest * sizeof(float));
    }
  }
}

void HybridRing::Loaded(int rank, OptimizerMirror* servers) {
  if (whole_->names().empty() || !whole_->materialized()) return;
  const std::vector<optim::StateBuffer> mine = optimizer_->state();
  const int64_t rest = whole_->range().size() - size_;
  if (rank == 0) servers->Materialize();
  for (size_t i = 0; i < whole_->names().size(); ++i) {
    const float* in = whole_->buffer(i);
    float* ring = Named(mine, whole_->names()[i]);
    if (ring != nullptr) std::memcpy(ring, in, size_ * sizeof(float));
    if (rank == 0) std::memcpy(servers->buffer(i), in + size_, rest * sizeof(float));
  }
  whole_->Release();
}

int64_t HybridRing::optimizer_bytes() const {
  return whole_->held_bytes() + optimizer_->state_bytes();
}

}  // namespace sync
}  // namespace tandem
