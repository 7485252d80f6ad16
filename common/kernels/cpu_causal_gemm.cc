// CpuBackend: causal attention's per-head GEMMs (backend.h, CausalGemm) on
// a register-tiled AVX-512 kernel.
//
// Why not OpenBLAS: at head size 64 its sgemm spends as much time packing
// both operands and zeroing C (beta = 0 is a separate pass) as multiplying;
// gpt_breakdown_bench measured these GEMMs at 45-70 GFLOP/s against ~130
// for the model's large ones. Here a tile of kRows rows x 64 columns (24
// zmm accumulators) runs the whole inner dimension in registers: each step
// loads 4 vectors of B and broadcasts kRows values of A. B rows are read in
// place (V, K, Q, dO straight from the fused projection); only the scores'
// B^T is packed, one [D, 64] panel at a time. The causal mask is taken at
// row granularity: a tile sums exactly the j <= i (or i >= j) terms, so A
// above the diagonal is never read, and the scores skip every 64-column
// panel entirely above a tile.
//
// The tile code uses GCC vector extensions of 16 floats, which are one zmm
// register only in an AVX-512 build; on other CPUs (or a forced narrower
// width) CausalGemmStridedBatched returns false and attention.cc runs
// OpenBLAS.
#include <algorithm>
#include <cstdint>

#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace {

using V16 = float __attribute__((vector_size(64)));
using V16u = float __attribute__((vector_size(64), aligned(4)));  // unaligned access

constexpr int kRows = 6;     // rows per register tile
constexpr int kPanel = 64;   // columns per tile (4 vectors)
constexpr int kMaxDim = 256;  // largest head size (the packed panel's depth)

// A(r, p) = a[r * ars + p * aps]: row-major A (ars = lda, aps = 1) or its
// transpose (ars = 1, aps = lda) read in place.
struct Operand {
  const float* a;
  int64_t ars, aps;
  const float* b;  // B row p at b + p * ldb, 16 * NV contiguous floats
  int64_t ldb;
};

// acc[r] += A(r, p) B[p] for p in [p0, p1), every row.
template <int R, int NV>
TANDEM_CPU_INLINE void AccumulateFull(V16 (&acc)[R][NV], const Operand& o, int p0, int p1) {
  for (int p = p0; p < p1; ++p) {
    V16 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const V16u*>(o.b + p * o.ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      const float s = o.a[r * o.ars + p * o.aps];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
}

// The R x R diagonal block p = p0 + q: row r takes q <= r (lower) or
// q >= r (transposed), so no entry above A's diagonal is read.
template <int R, int NV, bool kLower>
TANDEM_CPU_INLINE void AccumulateDiagonal(V16 (&acc)[R][NV], const Operand& o, int p0) {
  for (int q = 0; q < R; ++q) {
    const int p = p0 + q;
    V16 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const V16u*>(o.b + p * o.ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      if (kLower ? q > r : q < r) continue;  // resolved at compile time
      const float s = o.a[r * o.ars + p * o.aps];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
}

// C rows r < R, columns [0, width) = alpha * acc.
template <int R, int NV>
TANDEM_CPU_INLINE void Store(const V16 (&acc)[R][NV], float alpha, float* c, int64_t ldc,
                             int width) {
  if (width == 16 * NV) {  // the common case, kept apart so acc stays in registers
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < NV; ++v) *reinterpret_cast<V16u*>(c + r * ldc + 16 * v) = acc[r][v] * alpha;
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    for (int v = 0; v < NV; ++v) {
      const V16 out = acc[r][v] * alpha;
      const int n = std::min(16, width - 16 * v);  // <= 0 past the width
      for (int l = 0; l < n; ++l) cr[16 * v + l] = out[l];
    }
  }
}

// One tile of R rows starting at row `i0`: its p range by kind (a template
// argument, so each instantiation is one loop nest and keeps its
// accumulators in registers).
template <CausalGemm kKind, int R, int NV>
TANDEM_CPU_INLINE void Tile(int seq, int depth, int i0, const Operand& o, float alpha, float* c,
                            int64_t ldc, int width) {
  V16 acc[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = V16{};
  }
  if (kKind == CausalGemm::kScores) {
    AccumulateFull<R, NV>(acc, o, 0, depth);
  } else if (kKind == CausalGemm::kLowerTimes) {  // p in [0, i0 + r]
    AccumulateFull<R, NV>(acc, o, 0, i0);
    AccumulateDiagonal<R, NV, true>(acc, o, i0);
  } else {  // p in [i0 + r, seq)
    AccumulateDiagonal<R, NV, false>(acc, o, i0);
    AccumulateFull<R, NV>(acc, o, i0 + R, seq);
  }
  Store<R, NV>(acc, alpha, c, ldc, width);
}

// Rows [first, seq) of one panel in tiles of kRows, then single rows.
// `o.a` and `c` point at row 0; row i's A starts at a + i * ars.
template <CausalGemm kKind, int NV>
TANDEM_CPU_INLINE void Rows(int seq, int depth, int first, const Operand& o, float alpha,
                            float* c, int64_t ldc, int width) {
  int i = first;
  for (; i + kRows <= seq; i += kRows) {
    const Operand t{o.a + i * o.ars, o.ars, o.aps, o.b, o.ldb};
    Tile<kKind, kRows, NV>(seq, depth, i, t, alpha, c + i * ldc, ldc, width);
  }
  for (; i < seq; ++i) {
    const Operand t{o.a + i * o.ars, o.ars, o.aps, o.b, o.ldb};
    Tile<kKind, 1, NV>(seq, depth, i, t, alpha, c + i * ldc, ldc, width);
  }
}

// The scores of one head: panel [j0, j0 + 64) of keys, B^T packed
// [dim, 64] (zero past seq), is needed by rows i >= j0 only.
TANDEM_CPU_INLINE void ScoresHead(int seq, int dim, float alpha, const float* a, int lda,
                                  const float* b, int ldb, float* c, int ldc) {
  alignas(64) float packed[kMaxDim * kPanel];
  for (int j0 = 0; j0 < seq; j0 += kPanel) {
    const int width = std::min(kPanel, seq - j0);
    for (int j = 0; j < kPanel; ++j) {
      const float* key = b + static_cast<int64_t>(j0 + j) * ldb;
      // The keys come from a buffer far larger than the cache (the fused
      // projection's output): fetch a few rows ahead.
      if (j + 4 < width) {
        for (int p = 0; p < dim; p += 16) __builtin_prefetch(key + 4 * ldb + p);
      }
      if (j < width) {
        for (int p = 0; p < dim; ++p) packed[p * kPanel + j] = key[p];
      } else {
        for (int p = 0; p < dim; ++p) packed[p * kPanel + j] = 0.f;
      }
    }
    const Operand o{a, lda, 1, packed, kPanel};
    Rows<CausalGemm::kScores, 4>(seq, dim, j0, o, alpha, c + j0, ldc, width);
  }
}

// kLowerTimes: A(i, p) = a[i * lda + p]; transposed: A(j, p) = a[p * lda + j].
// B and C in panels of 64 columns (the last 16, 32 or 48 wide).
template <CausalGemm kKind>
TANDEM_CPU_INLINE void TimesHead(int seq, int dim, float alpha, const float* a, int lda,
                                 const float* b, int ldb, float* c, int ldc) {
  const bool lower = kKind == CausalGemm::kLowerTimes;
  for (int c0 = 0; c0 < dim; c0 += kPanel) {
    const int width = std::min(kPanel, dim - c0);
    const Operand o{a, lower ? lda : 1, lower ? 1 : lda, b + c0, ldb};
    switch (width / 16) {
      case 4:
        Rows<kKind, 4>(seq, seq, 0, o, alpha, c + c0, ldc, width);
        break;
      case 3:
        Rows<kKind, 3>(seq, seq, 0, o, alpha, c + c0, ldc, width);
        break;
      case 2:
        Rows<kKind, 2>(seq, seq, 0, o, alpha, c + c0, ldc, width);
        break;
      default:
        Rows<kKind, 1>(seq, seq, 0, o, alpha, c + c0, ldc, width);
    }
  }
}

TANDEM_CPU_TARGET_AVX512 void CausalGemmAvx512(CausalGemm kind, int seq, int dim, float alpha,
                                               const float* a, int lda, int64_t stride_a,
                                               const float* b, int ldb, int64_t stride_b, float* c,
                                               int ldc, int64_t stride_c, int batch) {
  for (int i = 0; i < batch; ++i) {
    const float* ai = a + i * stride_a;
    const float* bi = b + i * stride_b;
    float* ci = c + i * stride_c;
    switch (kind) {
      case CausalGemm::kScores:
        ScoresHead(seq, dim, alpha, ai, lda, bi, ldb, ci, ldc);
        break;
      case CausalGemm::kLowerTimes:
        TimesHead<CausalGemm::kLowerTimes>(seq, dim, alpha, ai, lda, bi, ldb, ci, ldc);
        break;
      case CausalGemm::kLowerTransposedTimes:
        TimesHead<CausalGemm::kLowerTransposedTimes>(seq, dim, alpha, ai, lda, bi, ldb, ci, ldc);
        break;
    }
  }
}

}  // namespace

bool CpuBackend::CausalGemmStridedBatched(CausalGemm kind, int seq, int head_dim, float alpha,
                                          const float* a, int lda, int64_t stride_a,
                                          const float* b, int ldb, int64_t stride_b, float* c,
                                          int ldc, int64_t stride_c, int batch) {
  if (numeric::ActiveComputeVectorWidth() != numeric::VectorWidth::kAvx512) return false;
  if (head_dim <= 0 || head_dim % 16 != 0 || head_dim > kMaxDim) return false;
  if (seq > 0 && batch > 0) {
    CausalGemmAvx512(kind, seq, head_dim, alpha, a, lda, stride_a, b, ldb, stride_b, c, ldc,
                     stride_c, batch);
  }
  return true;
}

}  // namespace kernels
}  // namespace tandem
