#include "common/shard/optimizer_config.h"

#include "absl/strings/str_cat.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace shard {

absl::StatusOr<v1::OptimizerConfig> DescribeOptimizer(const optim::Optimizer& optimizer) {
  v1::OptimizerConfig c;
  if (const auto* a = dynamic_cast<const optim::AdamW*>(&optimizer)) {
    c.set_name("adamw");
    c.set_beta1(a->options().beta1);
    c.set_beta2(a->options().beta2);
    c.set_epsilon(a->options().eps);
    c.set_weight_decay(a->options().weight_decay);
    return c;
  }
  if (const auto* s = dynamic_cast<const optim::Sgd*>(&optimizer)) {
    c.set_name("sgd");
    c.set_momentum(s->options().momentum);
    c.set_nesterov(s->options().nesterov);
    c.set_weight_decay(s->options().weight_decay);
    return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer '", optimizer.name(),
                   "' cannot run on a shard server (only sgd and adamw can)"));
}

absl::StatusOr<std::unique_ptr<optim::Optimizer>> BuildOptimizer(const v1::OptimizerConfig& c,
                                                                 optim::ParamRange range) {
  if (c.name() == "adamw") {
    optim::AdamWOptions o;
    o.beta1 = static_cast<float>(c.beta1());
    o.beta2 = static_cast<float>(c.beta2());
    o.eps = static_cast<float>(c.epsilon());
    o.weight_decay = static_cast<float>(c.weight_decay());
    ASSIGN_OR_RETURN(std::unique_ptr<optim::AdamW> a, optim::AdamW::Create(range, o));
    return std::unique_ptr<optim::Optimizer>(std::move(a));
  }
  if (c.name() == "sgd") {
    optim::SgdOptions o;
    o.momentum = static_cast<float>(c.momentum());
    o.nesterov = c.nesterov();
    o.weight_decay = static_cast<float>(c.weight_decay());
    ASSIGN_OR_RETURN(std::unique_ptr<optim::Sgd> s, optim::Sgd::Create(range, o));
    return std::unique_ptr<optim::Optimizer>(std::move(s));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", c.name(), "' (a shard server runs sgd or adamw)"));
}

bool SameOptimizer(const v1::OptimizerConfig& a, const v1::OptimizerConfig& b) {
  return a.name() == b.name() && a.momentum() == b.momentum() && a.nesterov() == b.nesterov() &&
         a.beta1() == b.beta1() && a.beta2() == b.beta2() && a.epsilon() == b.epsilon() &&
         a.weight_decay() == b.weight_decay();
}

}  // namespace shard
}  // namespace tandem
