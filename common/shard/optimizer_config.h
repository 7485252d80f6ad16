// The optimizer's settings as they travel to a shard server
// (tandem.v1.OptimizerConfig), both ways: a worker describes the optimizer
// its make_optimizer builds, and the server builds the same common/optim
// optimizer over its chunks, so a server step is the worker's step.
//
//   ASSIGN_OR_RETURN(v1::OptimizerConfig c, DescribeOptimizer(*opt));
//   ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> o, BuildOptimizer(c, range));
//
// Thread-safe (pure functions). INVALID_ARGUMENT for an optimizer other than
// Sgd / AdamW, an unknown name or values the optimizer refuses.
#ifndef TANDEM_COMMON_SHARD_OPTIMIZER_CONFIG_H_
#define TANDEM_COMMON_SHARD_OPTIMIZER_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"
#include "proto/shardserver.pb.h"

namespace tandem {
namespace shard {

absl::StatusOr<v1::OptimizerConfig> DescribeOptimizer(const optim::Optimizer& optimizer);
absl::StatusOr<std::unique_ptr<optim::Optimizer>> BuildOptimizer(const v1::OptimizerConfig& config,
                                                                 optim::ParamRange range);
// Same settings (the learning rate is per step and not compared).
bool SameOptimizer(const v1::OptimizerConfig& a, const v1::OptimizerConfig& b);

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_OPTIMIZER_CONFIG_H_
