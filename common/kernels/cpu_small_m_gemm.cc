// Small-M GEMMs that read the large operand in place (cpu_small_m_gemm.h).
//
// The tiles use GCC vector extensions of L floats (16 = one zmm in the
// AVX-512 build, 8 = one ymm in the AVX2+FMA build); every body is
// always-inline so each target wrapper at the bottom compiles its own copy.
#include "common/kernels/cpu_small_m_gemm.h"

#include <algorithm>
#include <cstring>

#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace cpu_internal {
namespace {

// Spelled out per width: GCC drops vector_size on a dependent alias.
template <int L>
struct Vec;
template <>
struct Vec<16> {
  using T = float __attribute__((vector_size(64)));
  using U = float __attribute__((vector_size(64), aligned(4)));  // unaligned access
};
template <>
struct Vec<8> {
  using T = float __attribute__((vector_size(32)));
  using U = float __attribute__((vector_size(32), aligned(4)));
};

template <int L>
TANDEM_CPU_INLINE typename Vec<L>::T Load(const float* p) {
  return *reinterpret_cast<const typename Vec<L>::U*>(p);
}
template <int L>
TANDEM_CPU_INLINE void Store(float* p, typename Vec<L>::T v) {
  *reinterpret_cast<typename Vec<L>::U*>(p) = v;
}

constexpr int kTileRows = 6;      // rows of B (NT) or of A (NN) per register tile
constexpr int kPrefetchRows = 8;  // NN: how far ahead B's strip rows are prefetched

// c = alpha * v + beta * c, beta == 0 never reading c.
TANDEM_CPU_INLINE void Put(float* c, float v, float alpha, float beta) {
  *c = beta == 0.f ? alpha * v : alpha * v + beta * *c;
}

// ---- NT: C = alpha A B^T + beta C, with ap = A^T packed [k][mpad].

// Rows n0..n0+R-1 of B against columns m0..m0+MV*L-1 of ap (rows of C);
// `mrows` of them are real.
template <int L, int R, int MV>
TANDEM_CPU_INLINE void NtTile(const float* ap, int mpad, int m0, int mrows, const float* b,
                              int64_t ldb, int n0, int k, float alpha, float beta, float* c,
                              int64_t ldc) {
  using V = typename Vec<L>::T;
  V acc[R][MV] = {};
  const float* brow[R];
  for (int r = 0; r < R; ++r) brow[r] = b + (n0 + r) * ldb;
  const float* x = ap + m0;
  for (int p = 0; p < k; ++p, x += mpad) {
    V xv[MV];
    for (int v = 0; v < MV; ++v) xv[v] = Load<L>(x + v * L);
    for (int r = 0; r < R; ++r) {
      const float s = brow[r][p];
      for (int v = 0; v < MV; ++v) acc[r][v] += s * xv[v];
    }
  }
  float out[R][MV * L];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < MV; ++v) Store<L>(out[r] + v * L, acc[r][v]);
  }
  for (int i = 0; i < mrows; ++i) {
    float* crow = c + (m0 + i) * ldc + n0;
    for (int r = 0; r < R; ++r) Put(crow + r, out[r][i], alpha, beta);
  }
}

template <int L, int R, int MVMAX>
TANDEM_CPU_INLINE void NtRowsOfB(const float* ap, int m, int mpad, const float* b, int64_t ldb,
                                 int n0, int k, float alpha, float beta, float* c, int64_t ldc) {
  for (int m0 = 0; m0 < m; m0 += MVMAX * L) {
    const int mrows = std::min(MVMAX * L, m - m0);
    switch ((mrows + L - 1) / L) {
      case 4:
        if constexpr (MVMAX >= 4) NtTile<L, R, 4>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
        break;
      case 3:
        if constexpr (MVMAX >= 3) NtTile<L, R, 3>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
        break;
      case 2:
        NtTile<L, R, 2>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
        break;
      default:
        NtTile<L, R, 1>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
    }
  }
}

template <int L, int MVMAX>
TANDEM_CPU_INLINE void NtRun(int m, int n, int k, float alpha, const float* a, int lda,
                             const float* b, int ldb, float beta, float* c, int ldc,
                             float* ap) {
  const int mpad = (m + L - 1) / L * L;
  for (int p = 0; p < k; ++p) {
    float* dst = ap + static_cast<int64_t>(p) * mpad;
    for (int i = 0; i < m; ++i) dst[i] = a[static_cast<int64_t>(i) * lda + p];
    for (int i = m; i < mpad; ++i) dst[i] = 0.f;
  }
  int n0 = 0;
  for (; n0 + kTileRows <= n; n0 += kTileRows) {
    NtRowsOfB<L, kTileRows, MVMAX>(ap, m, mpad, b, ldb, n0, k, alpha, beta, c, ldc);
  }
  for (; n0 < n; ++n0) NtRowsOfB<L, 1, MVMAX>(ap, m, mpad, b, ldb, n0, k, alpha, beta, c, ldc);
}

// ---- NN: C = alpha A B + beta C, B's rows read in place.

// Rows m0..m0+R-1 of A against columns j0..j0+CV*L-1 of B (stride ldb);
// `ncols` of those columns are real (C's), all CV*L readable in B.
template <int L, int R, int CV>
TANDEM_CPU_INLINE void NnTile(const float* a, int64_t lda, int m0, const float* b, int64_t ldb,
                              int j0, int ncols, int k, float alpha, float beta, float* c,
                              int64_t ldc, int cj0) {
  using V = typename Vec<L>::T;
  V acc[R][CV] = {};
  const float* arow = a + m0 * lda;
  const float* bp = b + j0;
  for (int p = 0; p < k; ++p, bp += ldb) {
    if (p + kPrefetchRows < k) {
      for (int v = 0; v < CV * L; v += 16) __builtin_prefetch(bp + kPrefetchRows * ldb + v);
    }
    V bv[CV];
    for (int v = 0; v < CV; ++v) bv[v] = Load<L>(bp + v * L);
    for (int r = 0; r < R; ++r) {
      const float s = arow[r * lda + p];
      for (int v = 0; v < CV; ++v) acc[r][v] += s * bv[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* crow = c + (m0 + r) * ldc + cj0;
    if (ncols == CV * L && beta == 0.f) {
      for (int v = 0; v < CV; ++v) Store<L>(crow + v * L, alpha * acc[r][v]);
      continue;
    }
    float out[CV * L];
    for (int v = 0; v < CV; ++v) Store<L>(out + v * L, acc[r][v]);
    for (int j = 0; j < ncols; ++j) Put(crow + j, out[j], alpha, beta);
  }
}

template <int L, int CV>
TANDEM_CPU_INLINE void NnStrip(int m, const float* a, int64_t lda, const float* b, int64_t ldb,
                               int j0, int ncols, int k, float alpha, float beta, float* c,
                               int64_t ldc, int cj0) {
  int m0 = 0;
  for (; m0 + kTileRows <= m; m0 += kTileRows) {
    NnTile<L, kTileRows, CV>(a, lda, m0, b, ldb, j0, ncols, k, alpha, beta, c, ldc, cj0);
  }
  for (; m0 < m; ++m0) NnTile<L, 1, CV>(a, lda, m0, b, ldb, j0, ncols, k, alpha, beta, c, ldc, cj0);
}

template <int L, int CVMAX>
TANDEM_CPU_INLINE void NnRun(int m, int n, int k, float alpha, const float* a, int lda,
                             const float* b, int ldb, float beta, float* c, int ldc,
                             float* tail) {
  int j0 = 0;
  for (; j0 + CVMAX * L <= n; j0 += CVMAX * L) {
    NnStrip<L, CVMAX>(m, a, lda, b, ldb, j0, CVMAX * L, k, alpha, beta, c, ldc, j0);
  }
  for (; j0 + L <= n; j0 += L) NnStrip<L, 1>(m, a, lda, b, ldb, j0, L, k, alpha, beta, c, ldc, j0);
  if (j0 == n) return;
  // The last n - j0 < L columns: B's copied into `tail` [k][L], zero-padded.
  const int cols = n - j0;
  for (int p = 0; p < k; ++p) {
    std::memcpy(tail + p * L, b + static_cast<int64_t>(p) * ldb + j0, cols * sizeof(float));
    std::memset(tail + p * L + cols, 0, (L - cols) * sizeof(float));
  }
  NnStrip<L, 1>(m, a, lda, tail, L, 0, cols, k, alpha, beta, c, ldc, j0);
}

#define TANDEM_SMALL_M_ARGS                                                               \
  (int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, \
   float beta, float* c, int ldc, float* scratch)
#define TANDEM_SMALL_M_PASS (m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch)

TANDEM_CPU_TARGET_AVX512 void NtAvx512 TANDEM_SMALL_M_ARGS { NtRun<16, 4> TANDEM_SMALL_M_PASS; }
TANDEM_CPU_TARGET_AVX2 void NtAvx2 TANDEM_SMALL_M_ARGS { NtRun<8, 2> TANDEM_SMALL_M_PASS; }
TANDEM_CPU_TARGET_AVX512 void NnAvx512 TANDEM_SMALL_M_ARGS { NnRun<16, 4> TANDEM_SMALL_M_PASS; }
TANDEM_CPU_TARGET_AVX2 void NnAvx2 TANDEM_SMALL_M_ARGS { NnRun<8, 2> TANDEM_SMALL_M_PASS; }

// Lanes of the width the kernels would run at now, 0 when none.
int Lanes() {
  switch (numeric::ActiveComputeVectorWidth()) {
    case numeric::VectorWidth::kAvx512:
      return 16;
    case numeric::VectorWidth::kAvx2:
      return 8;
    default:
      return 0;
  }
}

float* Scratch(std::vector<float>* scratch, size_t floats) {
  if (scratch->size() < floats) scratch->resize(floats);
  return scratch->data();
}

}  // namespace

bool SmallMGemmApplies(int m, int n, int k) {
  return m > 0 && m <= kSmallMMaxRows && n > 0 && k > 0 &&
         static_cast<int64_t>(n) * k >= kSmallMMinB && Lanes() != 0;
}

bool SmallMGemmNT(int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, std::vector<float>* scratch) {
  if (!SmallMGemmApplies(m, n, k)) return false;
  const int lanes = Lanes();
  const int mpad = (m + lanes - 1) / lanes * lanes;
  float* ap = Scratch(scratch, static_cast<size_t>(k) * mpad);
  if (lanes == 16) {
    NtAvx512(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ap);
  } else {
    NtAvx2(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ap);
  }
  return true;
}

bool SmallMGemmNN(int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, std::vector<float>* scratch) {
  if (!SmallMGemmApplies(m, n, k)) return false;
  const int lanes = Lanes();
  float* tail = Scratch(scratch, static_cast<size_t>(k) * lanes);
  if (lanes == 16) {
    NnAvx512(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, tail);
  } else {
    NnAvx2(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, tail);
  }
  return true;
}

}  // namespace cpu_internal
}  // namespace kernels
}  // namespace tandem
