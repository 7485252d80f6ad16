#include "common/sync/testing/synthetic_training.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync_testing {

nn::Batch SyntheticData::Slice(int first, int count) const {
  nn::Batch b;
  b.size = count;
  if (context == 0) {
    b.features = features.data() + static_cast<size_t>(first) * features_per_sample;
    b.labels = labels.data() + first;
  } else {
    b.tokens = tokens.data() + static_cast<size_t>(first) * context;
    b.labels = labels.data() + static_cast<size_t>(first) * context;
  }
  return b;
}

SyntheticData MakeSyntheticData(const nn::ModelSpec& spec, int samples) {
  SyntheticData d;
  std::mt19937 rng(2024);
  if (spec.kind == nn::ModelSpec::Kind::kMlp) {
    d.features_per_sample = spec.mlp.widths.front();
    const int classes = spec.mlp.widths.back();
    std::normal_distribution<float> normal(0.f, 1.f);
    d.features.resize(static_cast<size_t>(samples) * d.features_per_sample);
    for (float& x : d.features) x = normal(rng);
    d.labels.resize(samples);
    for (int32_t& y : d.labels) y = static_cast<int32_t>(rng() % classes);
  } else {
    d.context = spec.gpt.context;
    std::vector<int32_t> stream(static_cast<size_t>(samples) * d.context + 1);
    for (int32_t& t : stream) t = static_cast<int32_t>(rng() % spec.gpt.vocab);
    d.tokens.assign(stream.begin(), stream.end() - 1);
    d.labels.assign(stream.begin() + 1, stream.end());
  }
  return d;
}

absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeTestOptimizer(bool adamw,
                                                                     optim::ParamRange range) {
  if (adamw) {
    optim::AdamWOptions o;
    o.weight_decay = 0.01f;
    ASSIGN_OR_RETURN(std::unique_ptr<optim::AdamW> a, optim::AdamW::Create(range, o));
    return std::unique_ptr<optim::Optimizer>(std::move(a));
  }
  optim::SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 1e-4f;
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Sgd> s, optim::Sgd::Create(range, o));
  return std::unique_ptr<optim::Optimizer>(std::move(s));
}

optim::StepContext TestStepContext(bool adamw, int step) {
  optim::StepContext ctx;
  ctx.step = step;
  ctx.lr = adamw ? 1e-2f : 0.1f;
  return ctx;
}

double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (a[i] - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(n), 1e-30);
}

}  // namespace sync_testing
}  // namespace tandem
