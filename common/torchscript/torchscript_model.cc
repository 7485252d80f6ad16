// libtorch is included here and not next to common/log/log.h: Debian builds
// libtorch with glog, whose LOG / CHECK macros would clash with tandem's.
#include "common/torchscript/torchscript_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>
#include <utility>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace torchscript {
namespace {

// A libtorch exception in one line: without the C++ backtrace, and of a
// TorchScript interpreter traceback only its last line (the error itself,
// e.g. "RuntimeError: shape '[-1, 3, 32, 32]' is invalid ...").
std::string FirstLines(const std::exception& e) {
  std::string what = e.what();
  const size_t cut = what.find("\nException raised from");
  if (cut != std::string::npos) what.resize(cut);
  std::string last;
  for (absl::string_view line : absl::StrSplit(what, '\n', absl::SkipWhitespace())) {
    last = std::string(absl::StripAsciiWhitespace(line));
  }
  return last;
}

torch::ScalarType TorchType(nn::InputDType t) {
  switch (t) {
    case nn::InputDType::kUInt8: return torch::kUInt8;
    case nn::InputDType::kInt32: return torch::kInt32;
    case nn::InputDType::kInt64: return torch::kInt64;
    case nn::InputDType::kFloat32: break;
  }
  return torch::kFloat32;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

struct TorchScriptModel::Impl {
  std::string path;
  torch::jit::Module module;
  torch::Device device = torch::kCPU;
  nn::SampleSpec sample;
  bool has_loss = false;
  bool training = true;
  // Module order (named_parameters, duplicates dropped).
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> initial;  // the file's values, module order
  std::vector<int> flat_index;         // module index -> layout index
  std::vector<std::string> buffer_names;
  std::vector<torch::Tensor> buffers;
  std::string initial_buffers;
  // Strong references: autograd holds a parameter's accumulator weakly, and
  // a new one (without our hook) would replace it once a graph is freed.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<nn::GradRange> ranges;  // layout order
  torch::Tensor flat_grads;
  torch::Tensor loss, probs;
  // Backward state (the hooks run on the calling thread).
  const nn::GradReadyCallback* on_ready = nullptr;
  std::vector<char> ready;             // layout order
  std::vector<int> fired;              // module indices, in hook order
  bool probing = false;
  int64_t labels_per_sample = 1;
  torch::Tensor loss_value;            // float32 scalar of the last Forward

  absl::Status Run(const torch::Tensor& x, const torch::Tensor& labels, int* rows_per_sample);
  absl::Status CheckLogits(const torch::Tensor& logits, int64_t batch, int* rows_per_sample) const;
  std::string InputText(const torch::Tensor& x) const {
    return absl::StrCat(ShapeText(x.sizes().vec()), " ", c10::toString(x.scalar_type()));
  }

  void OnAccumulated(int module_index);
  absl::StatusOr<torch::Tensor> InputTensor(const nn::Batch& b) const;
  absl::StatusOr<torch::Tensor> LabelTensor(const nn::Batch& b, int64_t rows) const;
  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  }
};

namespace {

// Post-hook on a parameter's gradient accumulator: runs after the gradient
// was added into .grad (a tensor hook would run before).
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(TorchScriptModel::Impl* impl, int index) : impl_(impl), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    impl_->OnAccumulated(index_);
    return outputs;
  }

 private:
  TorchScriptModel::Impl* impl_;
  int index_;
};

}  // namespace

void TorchScriptModel::Impl::OnAccumulated(int module_index) {
  fired.push_back(module_index);
  if (probing) return;  // order only
  const int i = flat_index[module_index];
  if (ready[i]) return;
  ready[i] = 1;
  if (on_ready != nullptr && *on_ready) (*on_ready)(ranges[i]);
}

// The one place a Batch becomes the module's input: [B, *sample shape] in
// the dataset's dtype (token windows as int64), on the module's device,
// without a copy unless tokens are widened.
absl::StatusOr<torch::Tensor> TorchScriptModel::Impl::InputTensor(const nn::Batch& b) const {
  if (b.size < 1) return absl::InvalidArgumentError("empty batch");
  std::vector<int64_t> dims = {b.size};
  const void* data = b.inputs;
  nn::InputDType dtype = b.inputs_dtype;
  if (data != nullptr) {
    dims.insert(dims.end(), b.sample_shape.dims, b.sample_shape.dims + b.sample_shape.rank);
  } else {  // a Batch without the typed view (tests, older callers)
    data = sample.tokens ? static_cast<const void*>(b.tokens) : b.features;
    dtype = sample.tokens ? nn::InputDType::kInt32 : nn::InputDType::kFloat32;
    dims.insert(dims.end(), sample.shape.begin(), sample.shape.end());
  }
  if (data == nullptr) return absl::InvalidArgumentError("batch has no inputs");
  torch::Tensor x = torch::from_blob(const_cast<void*>(data), dims,
                                     torch::TensorOptions().device(device).dtype(TorchType(dtype)));
  return sample.tokens ? x.to(torch::kInt64) : x;
}

absl::StatusOr<torch::Tensor> TorchScriptModel::Impl::LabelTensor(const nn::Batch& b,
                                                                  int64_t rows) const {
  if (b.labels == nullptr) return absl::InvalidArgumentError("batch has no labels");
  torch::Tensor l = torch::from_blob(const_cast<int32_t*>(b.labels), {rows},
                                     torch::TensorOptions().device(device).dtype(torch::kInt32))
                        .to(torch::kInt64);
  return l.masked_fill(l < 0, -100);  // cross_entropy's ignore_index
}

absl::Status TorchScriptModel::Impl::CheckLogits(const torch::Tensor& logits, int64_t batch,
                                                int* rows_per_sample) const {
  const std::vector<int64_t> shape = logits.sizes().vec();
  const bool fits = (shape.size() == 2 || shape.size() == 3) && shape[0] == batch &&
                    shape.back() == sample.num_classes &&
                    (shape.size() == 2 ? 1 : shape[1]) == labels_per_sample &&
                    logits.is_floating_point();
  if (!fits) {
    return Bad(absl::StrCat(
        "forward returned ", c10::toString(logits.scalar_type()), " logits of shape ",
        ShapeText(shape), " for a batch of ", batch, "; the dataset needs ",
        labels_per_sample == 1 ? absl::StrCat("[", batch, ", ", sample.num_classes, "]")
                               : absl::StrCat("[", batch, ", ", labels_per_sample, ", ",
                                              sample.num_classes, "]"),
        " (", sample.num_classes, " classes, ", labels_per_sample,
        " label(s) per sample): make the last layer's width the dataset's class count"));
  }
  *rows_per_sample = static_cast<int>(shape.size() == 2 ? 1 : shape[1]);
  return absl::OkStatus();
}

// Forward (and the loss) on the module's input tensor and the flat labels.
absl::Status TorchScriptModel::Impl::Run(const torch::Tensor& x, const torch::Tensor& labels,
                                         int* rows_per_sample) {
  const int64_t batch = x.size(0);
  const int64_t classes = sample.num_classes;
  c10::optional<torch::NoGradGuard> no_grad;
  if (!training) no_grad.emplace();
  torch::Tensor l;
  try {
    const torch::Tensor shaped_labels =
        labels_per_sample == 1 ? labels : labels.reshape({batch, labels_per_sample});
    if (!(has_loss && training)) {
      torch::jit::IValue out = module.forward({x});
      if (!out.isTensor()) {
        return Bad(absl::StrCat("forward returned ", out.tagKind(),
                                ", not a tensor of logits [B, C] or [B, T, C]"));
      }
      const torch::Tensor logits = out.toTensor();
      RETURN_IF_ERROR(CheckLogits(logits, batch, rows_per_sample));
      const torch::Tensor rows = logits.reshape({-1, classes});
      probs = torch::softmax(rows.detach().to(torch::kFloat32), 1).contiguous();
      if (!has_loss) l = at::cross_entropy_loss(rows, labels);
    }
    if (has_loss) {
      torch::jit::IValue out = module.run_method("loss", x, shaped_labels);
      if (!out.isTensor() || out.toTensor().numel() != 1) {
        return Bad("loss(inputs, labels) must return a scalar tensor");
      }
      l = out.toTensor().reshape({});
    }
  } catch (const std::exception& e) {
    return Bad(absl::StrCat("the module's ", has_loss && training ? "loss" : "forward",
                            " failed on a batch of the dataset's samples (", InputText(x),
                            "): ", FirstLines(e)));
  }
  loss = l;
  loss_value = l.detach().to(torch::kFloat32).contiguous();
  return absl::OkStatus();
}

TorchScriptModel::TorchScriptModel(nn::ModelSpec spec, kernels::Backend* backend)
    : spec_(std::move(spec)), backend_(backend), impl_(std::make_unique<Impl>()) {}

TorchScriptModel::~TorchScriptModel() = default;

namespace {

absl::Status LoadModule(TorchScriptModel::Impl& m) {
  struct stat st;
  if (stat(m.path.c_str(), &st) != 0) {
    return m.Bad("no such file (save the module with torch.jit.save(torch.jit.script(model), "
                 "PATH); see examples/)");
  }
  if (!S_ISREG(st.st_mode)) return m.Bad("not a regular file");
  try {
    m.module = torch::jit::load(m.path, m.device);
  } catch (const std::exception& e) {
    return m.Bad(absl::StrCat("not a TorchScript archive (write it with torch.jit.save of a "
                              "torch.jit.script or torch.jit.trace module; torch.save writes a "
                              "pickle, which libtorch cannot load): ",
                              FirstLines(e)));
  }
  c10::optional<torch::jit::Method> forward = m.module.find_method("forward");
  if (!forward.has_value()) return m.Bad("the module has no forward method");
  const auto& args = forward->function().getSchema().arguments();
  if (args.size() != 2 || args[1].type()->kind() != c10::TypeKind::TensorType) {
    std::vector<std::string> shown;
    for (size_t i = 1; i < args.size(); ++i) {
      shown.push_back(absl::StrCat(args[i].name(), ": ", args[i].type()->str()));
    }
    return m.Bad(absl::StrCat("forward(", absl::StrJoin(shown, ", "),
                              ") must take exactly one tensor (the batch of samples) and return "
                              "logits"));
  }
  c10::optional<torch::jit::Method> loss = m.module.find_method("loss");
  if (loss.has_value()) {
    if (loss->function().getSchema().arguments().size() != 3) {
      return m.Bad("loss must take (inputs, labels) and return a scalar tensor");
    }
    m.has_loss = true;
  }
  return absl::OkStatus();
}

absl::Status CollectParameters(TorchScriptModel::Impl& m) {
  std::unordered_set<const void*> seen;  // tied weights appear once
  for (const auto& p : m.module.named_parameters(/*recurse=*/true)) {
    if (!seen.insert(p.value.unsafeGetTensorImpl()).second) continue;
    if (p.value.scalar_type() != torch::kFloat32) {
      return m.Bad(absl::StrCat("parameter ", p.name, " is ", c10::toString(p.value.scalar_type()),
                                "; tandem trains float32 parameters (register integer or other "
                                "state as a buffer, and convert the module with .float())"));
    }
    if (!p.value.requires_grad()) {
      return m.Bad(absl::StrCat("parameter ", p.name, " does not require grad; tandem trains every "
                                "parameter (register frozen weights as a buffer)"));
    }
    m.names.push_back(p.name);
    m.params.push_back(p.value);
    m.initial.push_back(p.value.detach().clone());
  }
  if (m.params.empty()) return m.Bad("the module has no parameters: nothing to train");
  for (const auto& b : m.module.named_buffers(/*recurse=*/true)) {
    m.buffer_names.push_back(b.name);
    m.buffers.push_back(b.value);
  }
  return absl::OkStatus();
}

}  // namespace

// Builds the layout in `order` (module indices), allocates the flat storage
// and re-points every parameter and .grad at it, keeping the values.
static absl::Status PointIntoStorage(TorchScriptModel::Impl& m, const std::vector<int>& order,
                                     kernels::Backend* backend, tensor::ParameterLayout* layout,
                                     tensor::FlatStorage* storage) {
  tensor::ParameterLayout l;
  for (size_t k = 0; k < order.size(); ++k) {
    const torch::Tensor& p = m.params[order[k]];
    l.Add(m.names[order[k]], p.sizes().vec(), static_cast<int>(k));
  }
  ASSIGN_OR_RETURN(tensor::FlatStorage s, tensor::FlatStorage::Create(backend, l));
  const auto opts = torch::TensorOptions().device(m.device).dtype(torch::kFloat32);
  torch::NoGradGuard no_grad;
  m.flat_index.assign(order.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    torch::Tensor& p = m.params[order[k]];
    const std::vector<int64_t> shape = p.sizes().vec();
    torch::Tensor view = torch::from_blob(s.param(static_cast<int>(k)), shape, opts);
    view.copy_(p.detach());  // any strides (channels-last too) into a contiguous view
    p.set_data(view);
    p.mutable_grad() = torch::from_blob(s.grad(static_cast<int>(k)), shape, opts);
    m.flat_index[order[k]] = static_cast<int>(k);
  }
  m.flat_grads = torch::from_blob(s.grads(), {s.size()}, opts);
  *layout = std::move(l);
  *storage = std::move(s);
  m.ranges = nn::GroupRanges(*layout);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TorchScriptModel>> TorchScriptModel::Create(
    const nn::ModelSpec& spec, kernels::Backend* backend, const nn::ModelOptions& options) {
  if (spec.kind != nn::ModelSpec::Kind::kTorchScript || backend == nullptr) {
    return absl::InvalidArgumentError("TorchScriptModel needs a torchscript: spec and a backend");
  }
  if (options.sample.shape.empty() || options.sample.num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", spec.ToString(), ": the sample shape and class count of the dataset are "
        "needed to check the module (ModelOptions::sample)"));
  }
  std::unique_ptr<TorchScriptModel> t(new TorchScriptModel(spec, backend));
  Impl& m = *t->impl_;
  m.path = spec.torchscript.path;
  m.sample = options.sample;
  m.labels_per_sample = 1;
  for (int64_t d : options.sample.label_shape) m.labels_per_sample *= d;
  if (options.sample.tokens && options.sample.label_shape.empty()) {
    m.labels_per_sample = options.sample.shape[0];  // next-token labels
  }
  t->num_classes_ = options.sample.num_classes;
  if (!backend->host_accessible()) {
    if (!torch::cuda::is_available()) {
      return absl::UnimplementedError(absl::StrCat(
          "--model ", spec.ToString(), " on --backend=", backend->name(), ": this libtorch has "
          "no CUDA (Debian's libtorch-dev is CPU-only); use --backend=cpu or build with a CUDA "
          "libtorch (TANDEM_LIBTORCH_PATH)"));
    }
    m.device = torch::Device(torch::kCUDA);
  }
  at::set_num_threads(std::max(1, options.torch_threads));
  RETURN_IF_ERROR(LoadModule(m));
  RETURN_IF_ERROR(CollectParameters(m));
  m.module.train(true);
  // DDP's first guess: gradients become ready in reverse parameter order.
  std::vector<int> order(m.params.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(order.size() - 1 - k);
  RETURN_IF_ERROR(PointIntoStorage(m, order, backend, &t->layout_, &t->storage_));
  for (size_t j = 0; j < m.params.size(); ++j) {
    m.accumulators.push_back(torch::autograd::impl::grad_accumulator(m.params[j]));
    m.accumulators.back()->add_post_hook(std::make_unique<ReadyHook>(&m, static_cast<int>(j)));
  }
  m.initial_buffers = t->SaveBuffers();
  RETURN_IF_ERROR(t->ProbeReadiness());
  return t;
}
absl::Status TorchScriptModel::ProbeReadiness() {
  Impl& m = *impl_;
  // A batch of 2: BatchNorm refuses a single value per channel.
  std::vector<int64_t> dims = {2};
  dims.insert(dims.end(), m.sample.shape.begin(), m.sample.shape.end());
  const auto on = torch::TensorOptions().device(m.device);
  const torch::Tensor x = torch::zeros(
      dims, on.dtype(m.sample.tokens ? torch::kInt64 : TorchType(m.sample.dtype)));
  const torch::Tensor labels = torch::zeros({2 * m.labels_per_sample}, on.dtype(torch::kInt64));
  // Dropout draws from the default generator: the probe must not move it.
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const at::Tensor rng = gen.get_state();
  m.probing = true;
  m.fired.clear();
  absl::Status s = m.Run(x, labels, &rows_per_sample_);
  if (s.ok()) {
    try {
      m.loss.backward();
    } catch (const std::exception& e) {
      s = m.Bad(absl::StrCat("backward through the module failed: ", FirstLines(e)));
    }
  }
  m.probing = false;
  m.loss = torch::Tensor();
  gen.set_state(rng);
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(LoadBuffers(m.initial_buffers));
  // Ready order as measured; parameters backward never reached go last.
  std::vector<int> order;
  std::vector<char> placed(m.params.size(), 0);
  for (int j : m.fired) {
    if (!placed[j]) order.push_back(j);
    placed[j] = 1;
  }
  for (int j = static_cast<int>(m.params.size()) - 1; j >= 0; --j) {
    if (!placed[j]) order.push_back(j);
  }
  RETURN_IF_ERROR(PointIntoStorage(m, order, backend_, &layout_, &storage_));
  for (size_t j = 0; j < m.params.size(); ++j) {
    if (torch::autograd::impl::try_get_grad_accumulator(m.params[j]) != m.accumulators[j]) {
      return absl::InternalError(absl::StrCat(m.path, ": parameter ", m.names[j],
                                              " lost its gradient hook when re-pointed"));
    }
  }
  m.flat_grads.zero_();
  SetHookRanges();
  return absl::OkStatus();
}

void TorchScriptModel::SetHookRanges() {
  // Forward order is the reverse of readiness order.
  hook_ranges_.clear();
  for (auto r = impl_->ranges.rbegin(); r != impl_->ranges.rend(); ++r) {
    hook_ranges_.push_back({r->lo, r->hi});
  }
}

absl::Status TorchScriptModel::Forward(const nn::Batch& batch) {
  Impl& m = *impl_;
  // The layers run inside TorchScript, where no per-layer hook reaches: a
  // strategy whose parameters land during the forward (zero1/zero2
  // overlap=1, ps/hybrid pipeline=1) is waited for in full first.
  for (size_t i = 0; i < hook_ranges_.size(); ++i) {
    RETURN_IF_ERROR(GatherLayer(static_cast<int>(i), tensor::ParamPass::kForward));
  }
  ASSIGN_OR_RETURN(torch::Tensor x, m.InputTensor(batch));
  ASSIGN_OR_RETURN(torch::Tensor labels, m.LabelTensor(batch, batch.size * m.labels_per_sample));
  int rows = rows_per_sample_;
  return m.Run(x, labels, &rows);
}

absl::Status TorchScriptModel::Backward(float grad_beta, const nn::GradReadyCallback& on_ready,
                                        float loss_scale) {
  Impl& m = *impl_;
  if (!m.loss.defined() || !m.loss.requires_grad()) {
    return absl::FailedPreconditionError(
        absl::StrCat(m.path, ": Backward needs a Forward in training mode first"));
  }
  if (grad_beta == 0.f) m.flat_grads.zero_();
  m.ready.assign(m.params.size(), 0);
  m.on_ready = &on_ready;
  absl::Status s;
  try {
    m.loss.backward(torch::full({}, loss_scale, m.loss.options()));
  } catch (const std::exception& e) {
    s = absl::InternalError(absl::StrCat(m.path, ": backward failed: ", FirstLines(e)));
  }
  m.on_ready = nullptr;
  m.loss = m.loss.detach();  // frees the graph
  RETURN_IF_ERROR(s);
  // Parameters this batch did not reach keep their (zero) gradient: final.
  for (size_t i = 0; i < m.ready.size(); ++i) {
    if (!m.ready[i] && on_ready) on_ready(m.ranges[i]);
  }
  return absl::OkStatus();
}

const float* TorchScriptModel::loss() const {
  return impl_->loss_value.defined() ? impl_->loss_value.data_ptr<float>() : nullptr;
}

const float* TorchScriptModel::probs() const {
  return impl_->probs.defined() ? impl_->probs.data_ptr<float>() : nullptr;
}

absl::Status TorchScriptModel::Initialize(uint64_t) {
  Impl& m = *impl_;
  {
    torch::NoGradGuard no_grad;
    for (size_t j = 0; j < m.params.size(); ++j) m.params[j].detach().copy_(m.initial[j]);
  }
  return LoadBuffers(m.initial_buffers);
}

void TorchScriptModel::SetTraining(bool training) {
  impl_->training = training;
  impl_->module.train(training);
}

std::string TorchScriptModel::SaveBuffers() const {
  std::string out;
  for (const torch::Tensor& b : impl_->buffers) {
    const torch::Tensor c = b.detach().to(torch::kCPU).contiguous();
    const uint64_t n = c.nbytes();
    out.append(reinterpret_cast<const char*>(&n), sizeof(n));
    out.append(static_cast<const char*>(c.data_ptr()), n);
  }
  return out;
}

absl::Status TorchScriptModel::LoadBuffers(absl::string_view bytes) {
  Impl& m = *impl_;
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    uint64_t n = 0;
    if (bytes.size() - at < sizeof(n)) break;
    std::memcpy(&n, bytes.data() + at, sizeof(n));
    at += sizeof(n);
    torch::Tensor& b = m.buffers[i];
    if (n != b.nbytes() || bytes.size() - at < n) {
      return absl::InvalidArgumentError(absl::StrCat(
          m.path, ": saved buffer ", m.buffer_names[i], " has ", n, " bytes, the module's ",
          b.nbytes(), " (buffers of another model?)"));
    }
    torch::Tensor src = torch::from_blob(const_cast<char*>(bytes.data() + at), b.sizes(),
                                         b.options().device(torch::kCPU));
    b.copy_(src);
    at += n;
  }
  if (at != bytes.size() || (bytes.empty() && !m.buffers.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        m.path, ": saved buffers (", bytes.size(), " bytes) do not match the module's ",
        m.buffers.size(), " buffers"));
  }
  return absl::OkStatus();
}

std::vector<std::string> TorchScriptModel::ParameterNames() const {
  std::vector<std::string> names;
  for (const tensor::ParameterInfo& p : layout_.params()) names.push_back(p.name);
  return names;
}

bool TorchScriptModel::has_loss_method() const { return impl_->has_loss; }

}  // namespace torchscript
}  // namespace tandem
