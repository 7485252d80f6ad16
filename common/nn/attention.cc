#include "common/nn/attention.h"

#include <algorithm>
#include <cmath>

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

using kernels::Activation;
using kernels::CausalGemm;
using kernels::Transpose;

namespace {

// Pointers into one sequence `b` of the attention buffers; every per-head
// matrix is one GEMM of a strided batch over the heads.
struct SeqViews {
  SeqViews(const CausalAttentionShape& s, int b)
      : width(s.heads * s.head_dim),
        ld_qkv(3 * width),
        qkv_off(static_cast<int64_t>(b) * s.seq * ld_qkv),
        out_off(static_cast<int64_t>(b) * s.seq * width),
        score_off(static_cast<int64_t>(b) * s.heads * s.seq * s.seq),
        score_stride(static_cast<int64_t>(s.seq) * s.seq) {}
  int width, ld_qkv;
  int64_t qkv_off, out_off, score_off, score_stride;
};

// Runs f(b, lo, hi) for every sequence b and block [lo, hi) of kCausalBlock
// rows (or columns).
template <typename F>
void ForBlocks(const CausalAttentionShape& s, F&& f) {
  for (int b = 0; b < s.batch; ++b) {
    for (int lo = 0; lo < s.seq; lo += kCausalBlock) f(b, lo, std::min(s.seq, lo + kCausalBlock));
  }
}

// Runs the backend's own causal kernel for every sequence (f(b) makes the
// call); false, with nothing done, where the backend declines (it declines
// the first sequence as it would every other: the shape decides).
template <typename F>
bool OnCausalKernel(const CausalAttentionShape& s, F&& f) {
  for (int b = 0; b < s.batch; ++b) {
    if (!f(b, SeqViews(s, b))) return false;
  }
  return true;
}

}  // namespace

double CausalAttentionGemmFlops(const CausalAttentionShape& s) {
  double cells = 0;  // score entries the blocks cover, per head
  for (int lo = 0; lo < s.seq; lo += kCausalBlock) {
    const int hi = std::min(s.seq, lo + kCausalBlock);
    cells += static_cast<double>(hi - lo) * hi;
  }
  return 2.0 * s.batch * s.heads * s.head_dim * cells;
}

// Row block [i0, i1) of every head: S[i0:i1, 0:i1] = Q[i0:i1] K[0:i1]^T.
void CausalScores(kernels::Backend* be, const CausalAttentionShape& s, float alpha,
                  const float* qkv, float* scores) {
  const bool done = OnCausalKernel(s, [&](int b, const SeqViews& v) {
    const float* q = qkv + v.qkv_off;
    return be->CausalGemmStridedBatched(CausalGemm::kScores, s.seq, s.head_dim, alpha, q, v.ld_qkv,
                                        s.head_dim, q + v.width, v.ld_qkv, s.head_dim,
                                        scores + v.score_off, s.seq, v.score_stride, s.heads);
  });
  if (done) return;
  ForBlocks(s, [&](int b, int i0, int i1) {
    const SeqViews v(s, b);
    const float* q = qkv + v.qkv_off;
    be->GemmStridedBatched(Transpose::kNo, Transpose::kYes, i1 - i0, i1, s.head_dim, alpha,
                           q + static_cast<int64_t>(i0) * v.ld_qkv, v.ld_qkv, s.head_dim,
                           q + v.width, v.ld_qkv, s.head_dim, 0.f,
                           scores + v.score_off + static_cast<int64_t>(i0) * s.seq, s.seq,
                           v.score_stride, s.heads);
  });
}

// O[i0:i1] = P[i0:i1, 0:i1] V[0:i1].
void CausalProbsTimesV(kernels::Backend* be, const CausalAttentionShape& s, const float* probs,
                       const float* qkv, float* out) {
  const bool done = OnCausalKernel(s, [&](int b, const SeqViews& v) {
    return be->CausalGemmStridedBatched(CausalGemm::kLowerTimes, s.seq, s.head_dim, 1.f,
                                        probs + v.score_off, s.seq, v.score_stride,
                                        qkv + v.qkv_off + 2 * v.width, v.ld_qkv, s.head_dim,
                                        out + v.out_off, v.width, s.head_dim, s.heads);
  });
  if (done) return;
  ForBlocks(s, [&](int b, int i0, int i1) {
    const SeqViews v(s, b);
    be->GemmStridedBatched(Transpose::kNo, Transpose::kNo, i1 - i0, s.head_dim, i1, 1.f,
                           probs + v.score_off + static_cast<int64_t>(i0) * s.seq, s.seq,
                           v.score_stride, qkv + v.qkv_off + 2 * v.width, v.ld_qkv, s.head_dim,
                           0.f, out + v.out_off + static_cast<int64_t>(i0) * v.width, v.width,
                           s.head_dim, s.heads);
  });
}

// dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T.
void CausalProbsGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* d_out,
                     const float* qkv, float* d_probs) {
  const bool done = OnCausalKernel(s, [&](int b, const SeqViews& v) {
    return be->CausalGemmStridedBatched(CausalGemm::kScores, s.seq, s.head_dim, 1.f,
                                        d_out + v.out_off, v.width, s.head_dim,
                                        qkv + v.qkv_off + 2 * v.width, v.ld_qkv, s.head_dim,
                                        d_probs + v.score_off, s.seq, v.score_stride, s.heads);
  });
  if (done) return;
  ForBlocks(s, [&](int b, int i0, int i1) {
    const SeqViews v(s, b);
    be->GemmStridedBatched(Transpose::kNo, Transpose::kYes, i1 - i0, i1, s.head_dim, 1.f,
                           d_out + v.out_off + static_cast<int64_t>(i0) * v.width, v.width,
                           s.head_dim, qkv + v.qkv_off + 2 * v.width, v.ld_qkv, s.head_dim, 0.f,
                           d_probs + v.score_off + static_cast<int64_t>(i0) * s.seq, s.seq,
                           v.score_stride, s.heads);
  });
}

// Column block [j0, j1): dV[j0:j1] = P[j0:seq, j0:j1]^T dO[j0:seq].
void CausalValueGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* probs,
                     const float* d_out, float* d_qkv) {
  const bool done = OnCausalKernel(s, [&](int b, const SeqViews& v) {
    return be->CausalGemmStridedBatched(CausalGemm::kLowerTransposedTimes, s.seq, s.head_dim, 1.f,
                                        probs + v.score_off, s.seq, v.score_stride,
                                        d_out + v.out_off, v.width, s.head_dim,
                                        d_qkv + v.qkv_off + 2 * v.width, v.ld_qkv, s.head_dim,
                                        s.heads);
  });
  if (done) return;
  ForBlocks(s, [&](int b, int j0, int j1) {
    const SeqViews v(s, b);
    be->GemmStridedBatched(Transpose::kYes, Transpose::kNo, j1 - j0, s.head_dim, s.seq - j0, 1.f,
                           probs + v.score_off + static_cast<int64_t>(j0) * s.seq + j0, s.seq,
                           v.score_stride, d_out + v.out_off + static_cast<int64_t>(j0) * v.width,
                           v.width, s.head_dim, 0.f,
                           d_qkv + v.qkv_off + 2 * v.width + static_cast<int64_t>(j0) * v.ld_qkv,
                           v.ld_qkv, s.head_dim, s.heads);
  });
}

// dQ[i0:i1] = dS[i0:i1, 0:i1] K[0:i1]; dK[j0:j1] = dS[j0:seq, j0:j1]^T Q[j0:seq].
void CausalQueryKeyGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* d_scores,
                        const float* qkv, float* d_qkv) {
  const bool done = OnCausalKernel(s, [&](int b, const SeqViews& v) {
    const float* ds = d_scores + v.score_off;
    const float* q = qkv + v.qkv_off;
    float* dq = d_qkv + v.qkv_off;
    return be->CausalGemmStridedBatched(CausalGemm::kLowerTimes, s.seq, s.head_dim, 1.f, ds,
                                        s.seq, v.score_stride, q + v.width, v.ld_qkv, s.head_dim,
                                        dq, v.ld_qkv, s.head_dim, s.heads) &&
           be->CausalGemmStridedBatched(CausalGemm::kLowerTransposedTimes, s.seq, s.head_dim,
                                        1.f, ds, s.seq, v.score_stride, q, v.ld_qkv, s.head_dim,
                                        dq + v.width, v.ld_qkv, s.head_dim, s.heads);
  });
  if (done) return;
  ForBlocks(s, [&](int b, int i0, int i1) {
    const SeqViews v(s, b);
    const float* ds = d_scores + v.score_off;
    const float* q = qkv + v.qkv_off;
    float* dq = d_qkv + v.qkv_off;
    be->GemmStridedBatched(Transpose::kNo, Transpose::kNo, i1 - i0, s.head_dim, i1, 1.f,
                           ds + static_cast<int64_t>(i0) * s.seq, s.seq, v.score_stride,
                           q + v.width, v.ld_qkv, s.head_dim, 0.f,
                           dq + static_cast<int64_t>(i0) * v.ld_qkv, v.ld_qkv, s.head_dim,
                           s.heads);
    be->GemmStridedBatched(Transpose::kYes, Transpose::kNo, i1 - i0, s.head_dim, s.seq - i0, 1.f,
                           ds + static_cast<int64_t>(i0) * s.seq + i0, s.seq, v.score_stride,
                           q + static_cast<int64_t>(i0) * v.ld_qkv, v.ld_qkv, s.head_dim, 0.f,
                           dq + v.width + static_cast<int64_t>(i0) * v.ld_qkv, v.ld_qkv,
                           s.head_dim, s.heads);
  });
}

CausalSelfAttention::CausalSelfAttention(int width, int heads, int context)
    : width_(width),
      heads_(heads),
      head_dim_(width / heads),
      context_(context),
      qkv_(width, 3 * width, Activation::kNone),
      proj_(width, width, Activation::kNone) {}

void CausalSelfAttention::AddParams(const std::string& prefix, int group,
                                    tensor::ParameterLayout* layout) {
  proj_.AddParams(prefix + ".proj", group, layout);
  qkv_.AddParams(prefix + ".qkv", group + 1, layout);
}

absl::Status CausalSelfAttention::Init(kernels::Backend* backend,
                                       const tensor::FlatStorage& storage,
                                       int max_batch) {
  backend_ = backend;
  max_batch_ = max_batch;
  const int max_rows = max_batch * context_;
  RETURN_IF_ERROR(qkv_.Init(backend, storage, max_rows));
  RETURN_IF_ERROR(proj_.Init(backend, storage, max_rows));
  const size_t act = static_cast<size_t>(max_rows) * width_ * sizeof(float);
  const size_t scores = static_cast<size_t>(max_batch) * heads_ * context_ *
                        context_ * sizeof(float);
  ASSIGN_OR_RETURN(d_qkv_, backend->Allocate(3 * act));
  ASSIGN_OR_RETURN(probs_, backend->Allocate(scores));
  ASSIGN_OR_RETURN(d_scores_, backend->Allocate(scores));
  ASSIGN_OR_RETURN(merged_, backend->Allocate(act));
  ASSIGN_OR_RETURN(d_merged_, backend->Allocate(act));
  return absl::OkStatus();
}

absl::Status CausalSelfAttention::Forward(const float* x, int batch, int seq) {
  RETURN_IF_ERROR(CheckRows("CausalSelfAttention (batch)", batch, max_batch_));
  RETURN_IF_ERROR(CheckRows("CausalSelfAttention (sequence)", seq, context_));
  batch_ = batch;
  seq_ = seq;
  const CausalAttentionShape s{batch, seq, heads_, head_dim_};
  RETURN_IF_ERROR(qkv_.Forward(x, batch * seq));
  // The 1/sqrt(head_dim) scale rides on the GEMM, so the softmax skips a pass.
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim_));
  CausalScores(backend_, s, scale, qkv_.output(), probs_.f32());
  backend_->CausalSoftmaxForward(batch * heads_, seq, 1.f, probs_.f32(), probs_.f32());
  CausalProbsTimesV(backend_, s, probs_.f32(), qkv_.output(), merged_.f32());
  return proj_.Forward(merged_.f32(), batch * seq);
}

absl::Status CausalSelfAttention::Backward(
    float* dy, float* dx, float grad_beta,
    const std::function<void()>& after_proj) {
  if (batch_ == 0) {
    return absl::FailedPreconditionError(
        "CausalSelfAttention: Backward before Forward");
  }
  const CausalAttentionShape s{batch_, seq_, heads_, head_dim_};
  RETURN_IF_ERROR(proj_.Backward(dy, d_merged_.f32(), grad_beta));
  if (after_proj) after_proj();
  const float* qkv = qkv_.output();
  CausalProbsGrad(backend_, s, d_merged_.f32(), qkv, d_scores_.f32());
  CausalValueGrad(backend_, s, probs_.f32(), d_merged_.f32(), d_qkv_.f32());
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim_));
  backend_->CausalSoftmaxBackward(batch_ * heads_, seq_, scale, probs_.f32(), d_scores_.f32(),
                                  d_scores_.f32());
  CausalQueryKeyGrad(backend_, s, d_scores_.f32(), qkv, d_qkv_.f32());
  return qkv_.Backward(d_qkv_.f32(), dx, grad_beta);
}

}  // namespace nn
}  // namespace tandem
