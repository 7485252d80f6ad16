#include "services/shardserver/shard_snapshot.h"

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/shard/optimizer_config.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace shardserver {

int64_t ShardSnapshot::bytes() const {
  int64_t n = static_cast<int64_t>(params.size());
  for (const auto& [name, values] : state) n += static_cast<int64_t>(values.size());
  return n * static_cast<int64_t>(sizeof(float));
}

absl::Status CaptureShard(RangeStore& store, int64_t generation, int64_t step, ShardSnapshot* s) {
  const StoreInfo info = store.info();
  if (info.generation == 0) {
    return absl::FailedPreconditionError(
        "SaveShard: this shard server holds no parameters (never initialised, or restarted)");
  }
  const int64_t n = info.range.size();
  s->step = -1;  // until the copy is whole
  s->params.resize(n);
  RETURN_IF_ERROR(
      store.ReadParams(generation, step, info.range.lo, info.range.hi, s->params.data()));
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> probe,
                   shard::BuildOptimizer(info.optimizer, optim::ParamRange{0, 0}));
  const std::vector<optim::StateBuffer> buffers = probe->state();
  s->state.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    s->state[i].first = buffers[i].name;
    s->state[i].second.resize(n);
    RETURN_IF_ERROR(store.ReadState(generation, step, buffers[i].name, info.range.lo,
                                    info.range.hi, s->state[i].second.data()));
  }
  s->optimizer_name = probe->name();
  s->range = info.range;
  s->generation = generation;
  s->step = step;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WriteShardFile(const ShardSnapshot& s, const v1::SaveShardRequest& r) {
  if (r.total_params() < s.range.hi) {
    return absl::InvalidArgumentError(absl::StrCat("SaveShard: total_params ", r.total_params(),
                                                   " is below this server's range end ",
                                                   s.range.hi));
  }
  checkpoint::CheckpointView v;
  v.model_fingerprint = r.model_fingerprint();
  v.step = s.step;
  v.total_params = r.total_params();
  v.range_lo = s.range.lo;
  v.range_hi = s.range.hi;
  v.params = absl::MakeConstSpan(s.params);
  v.optimizer_name = s.optimizer_name;
  for (const auto& [name, values] : s.state) v.optimizer_state.push_back({name, values});
  for (const v1::SaveShardBlob& b : r.blobs()) v.blobs.push_back({b.name(), b.data()});
  RETURN_IF_ERROR(checkpoint::WriteCheckpoint(r.path(), v));
  return s.bytes();
}

}  // namespace shardserver
}  // namespace tandem
