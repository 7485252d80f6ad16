#include "common/nn/gpt.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/nn/init.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

using kernels::Activation;

namespace {
constexpr tensor::ParamPass kFwd = tensor::ParamPass::kForward;
constexpr tensor::ParamPass kBwd = tensor::ParamPass::kBackward;
}  // namespace

GptModel::Block::Block(const GptConfig& c)
    : ln1(c.width),
      attn(c.width, c.heads, c.context),
      ln2(c.width),
      fc1(c.width, 4 * c.width, Activation::kGelu),
      fc2(4 * c.width, c.width, Activation::kNone) {}

GptModel::GptModel(const ModelSpec& spec, kernels::Backend* backend)
    : spec_(spec),
      backend_(backend),
      embedding_(spec.gpt.vocab, spec.gpt.context, spec.gpt.width),
      ln_f_(spec.gpt.width),
      head_(spec.gpt.width, spec.gpt.vocab, Activation::kNone, /*bias=*/false),
      loss_(spec.gpt.vocab) {}

absl::StatusOr<std::unique_ptr<GptModel>> GptModel::Create(
    const ModelSpec& spec, kernels::Backend* backend,
    const ModelOptions& options) {
  const GptConfig& c = spec.gpt;
  if (spec.kind != ModelSpec::Kind::kGpt || c.layers <= 0 || c.heads <= 0 ||
      c.width <= 0 || c.context <= 0 || c.vocab <= 0 ||
      c.width % c.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptModel: invalid spec ", spec.ToString()));
  }
  if (options.max_batch <= 0) {
    return absl::InvalidArgumentError("GptModel: max_batch must be > 0");
  }
  std::unique_ptr<GptModel> m(new GptModel(spec, backend));
  for (int l = 0; l < c.layers; ++l) {
    m->blocks_.push_back(std::make_unique<Block>(c));
  }
  int group = 0;
  m->head_.AddParams("head", group++, &m->layout_);
  m->ln_f_.AddParams("ln_f", group++, &m->layout_);
  for (int l = c.layers - 1; l >= 0; --l) {
    Block& b = *m->blocks_[l];
    const std::string p = absl::StrCat("h", l);
    b.fc2.AddParams(p + ".mlp.fc2", group++, &m->layout_);
    b.fc1.AddParams(p + ".mlp.fc1", group++, &m->layout_);
    b.ln2.AddParams(p + ".ln2", group++, &m->layout_);
    b.attn.AddParams(p + ".attn", group, &m->layout_);
    group += 2;
    b.ln1.AddParams(p + ".ln1", group++, &m->layout_);
  }
  m->embedding_.AddParams("embed", group++, &m->layout_);
  m->group_ranges_ = GroupRanges(m->layout_);
  // Hook ranges in forward order (HookUnit): groups g0..g1 in one range.
  auto unit = [&](int g0, int g1) {
    m->hook_ranges_.push_back({m->group_ranges_[g0].lo, m->group_ranges_[g1].hi});
  };
  unit(group - 1, group - 1);  // embed
  for (int l = 0; l < c.layers; ++l) {
    const int base = 2 + 6 * (c.layers - 1 - l);  // this block's fc2 group
    unit(base + 5, base + 5);  // ln1
    unit(base + 3, base + 4);  // attn: proj, qkv
    unit(base + 2, base + 2);  // ln2
    unit(base + 1, base + 1);  // fc1
    unit(base, base);          // fc2
  }
  unit(1, 1);  // ln_f
  unit(0, 0);  // head

  ASSIGN_OR_RETURN(m->storage_, tensor::FlatStorage::Create(backend, m->layout_));
  const int max_batch = options.max_batch;
  const int max_rows = max_batch * c.context;
  RETURN_IF_ERROR(m->embedding_.Init(backend, m->storage_, max_batch));
  for (auto& b : m->blocks_) {
    RETURN_IF_ERROR(b->ln1.Init(backend, m->storage_, max_rows));
    RETURN_IF_ERROR(b->attn.Init(backend, m->storage_, max_batch));
    RETURN_IF_ERROR(b->ln2.Init(backend, m->storage_, max_rows));
    RETURN_IF_ERROR(b->fc1.Init(backend, m->storage_, max_rows));
    RETURN_IF_ERROR(b->fc2.Init(backend, m->storage_, max_rows));
  }
  RETURN_IF_ERROR(m->ln_f_.Init(backend, m->storage_, max_rows));
  RETURN_IF_ERROR(m->head_.Init(backend, m->storage_, max_rows));
  RETURN_IF_ERROR(m->loss_.Init(backend, max_rows));
  const size_t row_bytes = static_cast<size_t>(max_rows) * c.width * sizeof(float);
  for (int i = 0; i < 2 * c.layers; ++i) {
    ASSIGN_OR_RETURN(kernels::DeviceBuffer buf, backend->Allocate(row_bytes));
    m->residual_.push_back(std::move(buf));
  }
  ASSIGN_OR_RETURN(m->d_residual_, backend->Allocate(row_bytes));
  ASSIGN_OR_RETURN(m->tmp1_, backend->Allocate(row_bytes));
  ASSIGN_OR_RETURN(m->tmp2_, backend->Allocate(row_bytes));
  ASSIGN_OR_RETURN(m->d_hidden_, backend->Allocate(4 * row_bytes));
  RETURN_IF_ERROR(m->Initialize(options.seed));
  return m;
}

absl::Status GptModel::Initialize(uint64_t seed) {
  InitRng rng(seed);
  std::vector<float> host(layout_.total_size(), 0.f);
  auto normal = [&](int index, float stddev) {
    const tensor::ParameterInfo& p = layout_.param(index);
    for (int64_t j = 0; j < p.size; ++j) host[p.offset + j] = rng.Normal(stddev);
  };
  auto fill = [&](int index, float value) {
    const tensor::ParameterInfo& p = layout_.param(index);
    for (int64_t j = 0; j < p.size; ++j) host[p.offset + j] = value;
  };
  const float stddev = 0.02f;
  const float resid_stddev = stddev / std::sqrt(2.f * spec_.gpt.layers);
  // Forward order, so values do not depend on the layout order. Biases are
  // already zero.
  normal(embedding_.token_index(), stddev);
  normal(embedding_.position_index(), stddev);
  for (auto& b : blocks_) {
    fill(b->ln1.gamma_index(), 1.f);
    normal(b->attn.qkv().weight_index(), stddev);
    normal(b->attn.proj().weight_index(), resid_stddev);
    fill(b->ln2.gamma_index(), 1.f);
    normal(b->fc1.weight_index(), stddev);
    normal(b->fc2.weight_index(), resid_stddev);
  }
  fill(ln_f_.gamma_index(), 1.f);
  normal(head_.weight_index(), stddev);
  return backend_->CopyToDevice(storage_.params(), host.data(),
                                host.size() * sizeof(float));
}

absl::Status GptModel::Forward(const Batch& batch) {
  if (batch.tokens == nullptr || batch.labels == nullptr) {
    return absl::InvalidArgumentError(
        "GptModel::Forward: the batch needs tokens and labels");
  }
  forward_done_ = false;
  const int seq = spec_.gpt.context;
  RETURN_IF_ERROR(Run(0, kFwd, [&] { return embedding_.Forward(batch.tokens, batch.size, seq); }));
  batch_ = batch.size;
  const int rows = batch.size * seq;
  const int64_t n = static_cast<int64_t>(rows) * spec_.gpt.width;
  const float* x = embedding_.output();
  for (size_t l = 0; l < blocks_.size(); ++l) {
    Block& b = *blocks_[l];
    float* mid = residual_[2 * l].f32();
    float* out = residual_[2 * l + 1].f32();
    const int u = BlockUnit(static_cast<int>(l));
    RETURN_IF_ERROR(Run(u, kFwd, [&] { return b.ln1.Forward(x, rows); }));
    RETURN_IF_ERROR(
        Run(u + 1, kFwd, [&] { return b.attn.Forward(b.ln1.output(), batch.size, seq); }));
    backend_->Add(n, x, b.attn.output(), mid);
    RETURN_IF_ERROR(Run(u + 2, kFwd, [&] { return b.ln2.Forward(mid, rows); }));
    RETURN_IF_ERROR(Run(u + 3, kFwd, [&] { return b.fc1.Forward(b.ln2.output(), rows); }));
    RETURN_IF_ERROR(Run(u + 4, kFwd, [&] { return b.fc2.Forward(b.fc1.output(), rows); }));
    backend_->Add(n, mid, b.fc2.output(), out);
    x = out;
  }
  const int top = BlockUnit(static_cast<int>(blocks_.size()));
  RETURN_IF_ERROR(Run(top, kFwd, [&] { return ln_f_.Forward(x, rows); }));
  RETURN_IF_ERROR(Run(top + 1, kFwd, [&] { return head_.Forward(ln_f_.output(), rows); }));
  RETURN_IF_ERROR(loss_.Forward(head_.output(), batch.labels, rows));
  forward_done_ = true;
  return absl::OkStatus();
}

absl::Status GptModel::Backward(float grad_beta,
                                const GradReadyCallback& on_ready,
                                float loss_scale) {
  if (!forward_done_) {
    return absl::FailedPreconditionError(
        "GptModel::Backward needs a successful Forward first");
  }
  int group = 0;
  auto ready = [&]() {
    if (on_ready) on_ready(group_ranges_[group]);
    ++group;
  };
  const int rows = batch_ * spec_.gpt.context;
  const int64_t n = static_cast<int64_t>(rows) * spec_.gpt.width;
  float* dres = d_residual_.f32();
  float* t1 = tmp1_.f32();
  float* t2 = tmp2_.f32();

  const int top = BlockUnit(static_cast<int>(blocks_.size()));
  RETURN_IF_ERROR(loss_.Backward(loss_scale));
  RETURN_IF_ERROR(Run(top + 1, kBwd, [&] { return head_.Backward(loss_.dlogits(), t1, grad_beta); }));
  ready();
  RETURN_IF_ERROR(Run(top, kBwd, [&] { return ln_f_.Backward(t1, dres, grad_beta); }));
  ready();
  for (int l = static_cast<int>(blocks_.size()) - 1; l >= 0; --l) {
    Block& b = *blocks_[l];
    // out = mid + fc2(fc1(ln2(mid))). fc2 and the attention's output
    // projection have no activation, so their Backward leaves dy as is and
    // both branches read the residual gradient itself.
    const int u = BlockUnit(l);
    RETURN_IF_ERROR(Run(u + 4, kBwd, [&] { return b.fc2.Backward(dres, d_hidden_.f32(), grad_beta); }));
    ready();
    RETURN_IF_ERROR(Run(u + 3, kBwd, [&] { return b.fc1.Backward(d_hidden_.f32(), t2, grad_beta); }));
    ready();
    RETURN_IF_ERROR(Run(u + 2, kBwd, [&] { return b.ln2.Backward(t2, t1, grad_beta); }));
    ready();
    backend_->Axpy(n, 1.f, t1, dres);
    // mid = in + attn(ln1(in)).
    RETURN_IF_ERROR(Run(u + 1, kBwd, [&] { return b.attn.Backward(dres, t2, grad_beta, ready); }));
    ready();
    RETURN_IF_ERROR(Run(u, kBwd, [&] { return b.ln1.Backward(t2, t1, grad_beta); }));
    ready();
    backend_->Axpy(n, 1.f, t1, dres);
  }
  RETURN_IF_ERROR(Run(0, kBwd, [&] { return embedding_.Backward(dres, grad_beta); }));
  ready();
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
