#include "tools/bench/gpt_step_kernels.h"

#include <cmath>
#include <memory>
#include <random>

#include "common/nn/attention.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace bench {
namespace {

using kernels::Activation;
using kernels::Backend;
using kernels::DeviceBuffer;
using kernels::Transpose;

// Every buffer the step's kernels touch, sized once.
struct Buffers {
  float *x, *y, *dy, *dx, *qkv, *dqkv, *scores, *dprobs, *dscores, *merged;
  float *hz, *hy, *dh, *logits, *probs, *weight, *dweight, *bias, *dbias;
  float *gamma, *beta, *mean, *rstd, *token, *pos, *dtoken, *dpos, *loss;
  int32_t *ids, *labels;
};

// Owns the allocations behind a Buffers.
struct Storage {
  std::vector<DeviceBuffer> owned;
  Buffers b;
};

absl::StatusOr<float*> Alloc(Backend* be, Storage* b, int64_t floats, std::mt19937* rng) {
  ASSIGN_OR_RETURN(DeviceBuffer buf, be->Allocate(static_cast<size_t>(floats) * sizeof(float)));
  std::vector<float> host(floats);
  std::normal_distribution<float> normal(0.f, 0.5f);
  for (float& v : host) v = normal(*rng);
  RETURN_IF_ERROR(be->CopyToDevice(buf.data(), host.data(), buf.bytes()));
  float* p = buf.f32();
  b->owned.push_back(std::move(buf));
  return p;
}

absl::Status AllocAll(const nn::GptConfig& c, int batch, Backend* be, Storage* s) {
  Buffers* b = &s->b;
  const int64_t R = int64_t{batch} * c.context, W = c.width, V = c.vocab;
  const int64_t scores = int64_t{batch} * c.heads * c.context * c.context;
  std::mt19937 rng(7);
  float** big[] = {&b->x, &b->y, &b->dy, &b->dx, &b->merged};
  for (float** p : big) {
    ASSIGN_OR_RETURN(*p, Alloc(be, s, R * W, &rng));
  }
  ASSIGN_OR_RETURN(b->qkv, Alloc(be, s, R * 3 * W, &rng));
  ASSIGN_OR_RETURN(b->dqkv, Alloc(be, s, R * 3 * W, &rng));
  ASSIGN_OR_RETURN(b->scores, Alloc(be, s, scores, &rng));
  ASSIGN_OR_RETURN(b->dprobs, Alloc(be, s, scores, &rng));
  ASSIGN_OR_RETURN(b->dscores, Alloc(be, s, scores, &rng));
  float** hidden[] = {&b->hz, &b->hy, &b->dh};
  for (float** p : hidden) {
    ASSIGN_OR_RETURN(*p, Alloc(be, s, R * 4 * W, &rng));
  }
  ASSIGN_OR_RETURN(b->logits, Alloc(be, s, R * V, &rng));
  ASSIGN_OR_RETURN(b->probs, Alloc(be, s, R * V, &rng));
  const int64_t wmax = std::max(4 * W * W, V * W);
  ASSIGN_OR_RETURN(b->weight, Alloc(be, s, wmax, &rng));
  ASSIGN_OR_RETURN(b->dweight, Alloc(be, s, wmax, &rng));
  float** vec[] = {&b->bias, &b->dbias, &b->gamma, &b->beta};
  for (float** p : vec) {
    ASSIGN_OR_RETURN(*p, Alloc(be, s, 4 * W, &rng));
  }
  // GPT-2's weight scale and zero biases, so activations stay O(1) as the
  // kernels feed each other (no overflow, no denormals).
  be->Scale(wmax, 0.04f, b->weight);
  be->Fill(b->bias, 4 * W, 0.f);
  ASSIGN_OR_RETURN(b->mean, Alloc(be, s, R, &rng));
  ASSIGN_OR_RETURN(b->rstd, Alloc(be, s, R, &rng));
  be->Fill(b->rstd, R, 1.f);
  ASSIGN_OR_RETURN(b->token, Alloc(be, s, V * W, &rng));
  ASSIGN_OR_RETURN(b->dtoken, Alloc(be, s, V * W, &rng));
  ASSIGN_OR_RETURN(b->pos, Alloc(be, s, int64_t{c.context} * W, &rng));
  ASSIGN_OR_RETURN(b->dpos, Alloc(be, s, int64_t{c.context} * W, &rng));
  ASSIGN_OR_RETURN(b->loss, Alloc(be, s, 1, &rng));
  std::vector<int32_t> ids(R), labels(R);
  for (int64_t i = 0; i < R; ++i) ids[i] = rng() % V, labels[i] = rng() % V;
  ASSIGN_OR_RETURN(DeviceBuffer i_buf, be->Allocate(R * sizeof(int32_t)));
  ASSIGN_OR_RETURN(DeviceBuffer l_buf, be->Allocate(R * sizeof(int32_t)));
  RETURN_IF_ERROR(be->CopyToDevice(i_buf.data(), ids.data(), i_buf.bytes()));
  RETURN_IF_ERROR(be->CopyToDevice(l_buf.data(), labels.data(), l_buf.bytes()));
  b->ids = i_buf.i32();
  b->labels = l_buf.i32();
  s->owned.push_back(std::move(i_buf));
  s->owned.push_back(std::move(l_buf));
  return absl::OkStatus();
}

// Adds a row-major GEMM entry C[m,n] = op(A) op(B) with op(A) [m,k].
void AddGemm(std::vector<StepKernel>* out, const std::string& name, int count, Backend* be,
             Transpose ta, Transpose tb, int m, int n, int k, const float* a, const float* b,
             float* c) {
  const int lda = ta == Transpose::kNo ? k : m, ldb = tb == Transpose::kNo ? n : k;
  out->push_back({name, count, 2.0 * m * n * k, 4.0 * (double{m} * k + double{k} * n + double{m} * n),
                  [=] { be->Gemm(ta, tb, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, n); }});
}

// The forward kernels of gpt.cc / attention.cc / linear.cc, in call order.
void AddForward(const nn::GptConfig& c, int batch, Backend* be, const Buffers& b,
                std::vector<StepKernel>* out) {
  const int L = c.layers, T = c.context, W = c.width, V = c.vocab, H = c.heads, D = W / H;
  const int R = batch * T, BH = batch * H;
  const double f = sizeof(float), rw = double{R} * W * f, tt = double{BH} * T * T * f;
  out->push_back({"embed.fwd", 1, 0, 3 * rw, [=] {
                    be->EmbeddingForward(batch, T, W, b.ids, b.token, b.pos, b.x);
                  }});
  out->push_back({"layernorm.fwd (ln1,ln2,lnf)", 2 * L + 1, 0, 2 * rw, [=] {
                    be->LayerNormForward(R, W, 1e-5f, b.x, b.gamma, b.beta, b.y, b.mean, b.rstd);
                  }});
  AddGemm(out, "qkv.gemm", L, be, Transpose::kNo, Transpose::kYes, R, 3 * W, W, b.y, b.weight,
          b.qkv);
  out->push_back({"qkv.bias", L, 0, 6 * rw, [=] {
                    be->BiasActivationForward(Activation::kNone, R, 3 * W, b.bias, b.qkv, b.qkv);
                  }});
  const nn::CausalAttentionShape shape{batch, T, H, D};
  const double af = nn::CausalAttentionGemmFlops(shape);
  out->push_back({"attn.scores QK^T (causal)", L, af, tt / 2 + 2 * rw,
                  [=] { nn::CausalScores(be, shape, 0.125f, b.qkv, b.scores); }});
  out->push_back({"attn.softmax.fwd", L, 0, tt, [=] {
                    be->CausalSoftmaxForward(BH, T, 1.f, b.scores, b.scores);
                  }});
  out->push_back({"attn.PV (causal)", L, af, tt / 2 + 2 * rw,
                  [=] { nn::CausalProbsTimesV(be, shape, b.scores, b.qkv, b.merged); }});
  AddGemm(out, "proj.gemm", L, be, Transpose::kNo, Transpose::kYes, R, W, W, b.merged, b.weight,
          b.y);
  out->push_back({"proj.bias / fc2.bias", 2 * L, 0, 2 * rw, [=] {
                    be->BiasActivationForward(Activation::kNone, R, W, b.bias, b.y, b.y);
                  }});
  out->push_back({"residual.add", 2 * L, 0, 3 * rw, [=] {
                    be->Add(int64_t{R} * W, b.x, b.y, b.dx);
                  }});
  AddGemm(out, "fc1.gemm", L, be, Transpose::kNo, Transpose::kYes, R, 4 * W, W, b.y, b.weight,
          b.hz);
  out->push_back({"fc1.bias+gelu", L, 0, 12 * rw, [=] {
                    be->BiasActivationForwardKeepGrad(Activation::kGelu, R, 4 * W, b.bias, b.hz,
                                                      b.hy);
                  }});
  AddGemm(out, "fc2.gemm", L, be, Transpose::kNo, Transpose::kYes, R, W, 4 * W, b.hy, b.weight,
          b.y);
  AddGemm(out, "head.gemm", 1, be, Transpose::kNo, Transpose::kYes, R, V, W, b.y, b.weight,
          b.logits);
  out->push_back({"xent.fwd", 1, 0, 2.0 * R * V * f, [=] {
                    be->SoftmaxCrossEntropyForward(R, V, b.logits, b.labels, 1.f / R, b.probs,
                                                   b.loss);
                  }});
}

// The backward kernels, in call order.
void AddBackward(const nn::GptConfig& c, int batch, Backend* be, const Buffers& b,
                 std::vector<StepKernel>* out) {
  const int L = c.layers, T = c.context, W = c.width, V = c.vocab, H = c.heads, D = W / H;
  const int R = batch * T, BH = batch * H;
  const double f = sizeof(float), rw = double{R} * W * f, tt = double{BH} * T * T * f;
  const int64_t n = int64_t{R} * W;
  out->push_back({"xent.bwd", 1, 0, 2.0 * R * V * f, [=] {
                    be->SoftmaxCrossEntropyBackward(R, V, b.probs, b.labels, 1.f / R, b.logits);
                  }});
  AddGemm(out, "head.dW", 1, be, Transpose::kYes, Transpose::kNo, V, W, R, b.logits, b.y,
          b.dweight);
  AddGemm(out, "head.dx", 1, be, Transpose::kNo, Transpose::kNo, R, W, V, b.logits, b.weight,
          b.dy);
  out->push_back({"layernorm.bwd", 2 * L + 1, 0, 3 * rw, [=] {
                    be->LayerNormBackward(R, W, b.x, b.gamma, b.mean, b.rstd, b.dy, b.dx, b.dbias,
                                          b.dbias + W, 0.f);
                  }});
  out->push_back({"proj.bias_grad / fc2.bias_grad", 2 * L, 0, rw, [=] {
                    be->BiasActivationBackward(Activation::kNone, R, W, b.y, b.dy, b.dy, b.dbias,
                                               0.f);
                  }});
  AddGemm(out, "fc2.dW", L, be, Transpose::kYes, Transpose::kNo, W, 4 * W, R, b.dy, b.hy,
          b.dweight);
  AddGemm(out, "fc2.dx", L, be, Transpose::kNo, Transpose::kNo, R, 4 * W, W, b.dy, b.weight,
          b.dh);
  out->push_back({"fc1.bias+gelu.bwd", L, 0, 12 * rw, [=] {
                    be->BiasActivationBackwardFromGrad(R, 4 * W, b.hz, b.dh, b.dh, b.dbias, 0.f);
                  }});
  AddGemm(out, "fc1.dW", L, be, Transpose::kYes, Transpose::kNo, 4 * W, W, R, b.dh, b.y,
          b.dweight);
  AddGemm(out, "fc1.dx", L, be, Transpose::kNo, Transpose::kNo, R, W, 4 * W, b.dh, b.weight,
          b.dx);
  out->push_back({"residual.axpy", 2 * L, 0, 3 * rw,
                  [=] { be->Axpy(n, 1.f, b.dx, b.dy); }});
  AddGemm(out, "proj.dW", L, be, Transpose::kYes, Transpose::kNo, W, W, R, b.dy, b.merged,
          b.dweight);
  AddGemm(out, "proj.dx", L, be, Transpose::kNo, Transpose::kNo, R, W, W, b.dy, b.weight,
          b.merged);
  const nn::CausalAttentionShape shape{batch, T, H, D};
  const double af = nn::CausalAttentionGemmFlops(shape);
  out->push_back({"attn.dP = dO V^T (causal)", L, af, tt / 2 + 2 * rw,
                  [=] { nn::CausalProbsGrad(be, shape, b.merged, b.qkv, b.dprobs); }});
  out->push_back({"attn.dV = P^T dO (causal)", L, af, tt / 2 + 2 * rw,
                  [=] { nn::CausalValueGrad(be, shape, b.scores, b.merged, b.dqkv); }});
  // Out of place: repeated in place (as the timing loop runs it) the
  // gradient would shrink into denormals and slow every GEMM after it.
  out->push_back({"attn.softmax.bwd", L, 0, 1.5 * tt, [=] {
                    be->CausalSoftmaxBackward(BH, T, 0.125f, b.scores, b.dprobs, b.dscores);
                  }});
  out->push_back({"attn.dQ, dK (causal)", L, 2 * af, tt + 4 * rw,
                  [=] { nn::CausalQueryKeyGrad(be, shape, b.dscores, b.qkv, b.dqkv); }});
  out->push_back({"qkv.bias_grad", L, 0, 3 * rw, [=] {
                    be->BiasActivationBackward(Activation::kNone, R, 3 * W, b.qkv, b.dqkv,
                                               b.dqkv, b.dbias, 0.f);
                  }});
  AddGemm(out, "qkv.dW", L, be, Transpose::kYes, Transpose::kNo, 3 * W, W, R, b.dqkv, b.y,
          b.dweight);
  AddGemm(out, "qkv.dx", L, be, Transpose::kNo, Transpose::kNo, R, W, 3 * W, b.dqkv, b.weight,
          b.dx);
  out->push_back({"embed.bwd", 1, 0, 3 * rw, [=] {
                    be->EmbeddingBackward(batch, T, W, b.ids, b.dy, b.dtoken, b.dpos);
                  }});
}

}  // namespace

absl::StatusOr<std::vector<StepKernel>> GptStepKernels(const nn::GptConfig& config, int batch,
                                                       kernels::Backend* backend) {
  auto buffers = std::make_shared<Storage>();
  RETURN_IF_ERROR(AllocAll(config, batch, backend, buffers.get()));
  std::vector<StepKernel> out;
  AddForward(config, batch, backend, buffers->b, &out);
  AddBackward(config, batch, backend, buffers->b, &out);
  // Each closure keeps the buffers alive.
  for (StepKernel& k : out) {
    k.run = [buffers, run = std::move(k.run)] { run(); };
  }
  return out;
}

}  // namespace bench
}  // namespace tandem
