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

constexpr int kTileRows = 6;  // rows of B (NT) or of A (NN) per register tile

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
        if constexpr (MVMAX >= 4)
          NtTile<L, R, 4>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
        break;
      case 3:
        if constexpr (MVMAX >= 3)
          NtTile<L, R, 3>(ap, mpad, m0, mrows, b, ldb, n0, k, alpha, beta, c, ldc);
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
                             const float* b, int ldb, float beta, float* c, int ldc, float* ap) {
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

// Rows m0..m0+R-1 of A against the CV*L columns at `src` (row p at src + p *
// lds); `ncols` of them are real (C's columns cj0...). kPack: src is B in
// place (rows a page apart, which conflict in L1/L2 when re-read), and each
// row is also written to `pk` [k][CV*L], which the strip's later tiles read
// instead.
template <int L, int R, int CV, bool kPack>
TANDEM_CPU_INLINE void NnTile(const float* a, int64_t lda, int m0, const float* src, int64_t lds,
                              float* pk, int64_t next, int ncols, int k, float alpha, float beta,
                              float* c, int64_t ldc, int cj0) {
  using V = typename Vec<L>::T;
  V acc[R][CV] = {};
  const float* arow = a + m0 * lda;
  const float* bp = src;
  for (int p = 0; p < k; ++p, bp += lds) {
    if (kPack && next != 0) {  // the next block's rows of this strip, into L2
      for (int v = 0; v < CV * L; v += 16) __builtin_prefetch(bp + next + v, 0, 2);
    }
    V bv[CV];
    for (int v = 0; v < CV; ++v) bv[v] = Load<L>(bp + v * L);
    if (kPack) {
      for (int v = 0; v < CV; ++v) Store<L>(pk + p * (CV * L) + v * L, bv[v]);
    }
    for (int r = 0; r < R; ++r) {
      const float s = arow[r * lda + p];
      for (int v = 0; v < CV; ++v) acc[r][v] += s * bv[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* crow = c + (m0 + r) * ldc + cj0;
    if (ncols == CV * L) {
      for (int v = 0; v < CV; ++v) {
        typename Vec<L>::T out = alpha * acc[r][v];
        if (beta != 0.f) out += beta * Load<L>(crow + v * L);
        Store<L>(crow + v * L, out);
      }
      continue;
    }
    float out[CV * L];
    for (int v = 0; v < CV; ++v) Store<L>(out + v * L, acc[r][v]);
    for (int j = 0; j < ncols; ++j) Put(crow + j, out[j], alpha, beta);
  }
}

// One tile of R rows at m0: the strip's first tile reads B in place and
// packs it into `pk` when `pk` is set (prefetching `next` floats ahead),
// later ones read `pk`.
template <int L, int R, int CV>
TANDEM_CPU_INLINE void NnTileAt(const float* a, int64_t lda, int m0, const float* b, int64_t ldb,
                                float* pk, int64_t next, int ncols, int k, float alpha, float beta,
                                float* c, int64_t ldc, int cj0) {
  if (pk == nullptr) {
    NnTile<L, R, CV, false>(a, lda, m0, b, ldb, nullptr, 0, ncols, k, alpha, beta, c, ldc, cj0);
  } else if (m0 == 0) {
    NnTile<L, R, CV, true>(a, lda, m0, b, ldb, pk, next, ncols, k, alpha, beta, c, ldc, cj0);
  } else {
    NnTile<L, R, CV, false>(a, lda, m0, pk, CV * L, nullptr, 0, ncols, k, alpha, beta, c, ldc, cj0);
  }
}

// A tile of `rows` < R + 1 rows at m0 (nothing when rows is 0).
template <int L, int R, int CV>
TANDEM_CPU_INLINE void NnLastRows(int rows, const float* a, int64_t lda, int m0, const float* b,
                                  int64_t ldb, float* pk, int64_t next, int ncols, int k,
                                  float alpha, float beta, float* c, int64_t ldc, int cj0) {
  if (rows == R) {
    NnTileAt<L, R, CV>(a, lda, m0, b, ldb, pk, next, ncols, k, alpha, beta, c, ldc, cj0);
  } else if constexpr (R > 1) {
    NnLastRows<L, R - 1, CV>(rows, a, lda, m0, b, ldb, pk, next, ncols, k, alpha, beta, c, ldc,
                             cj0);
  }
}

// All rows of C against one strip of B's columns (b = its first column).
template <int L, int CV>
TANDEM_CPU_INLINE void NnStrip(int m, const float* a, int64_t lda, const float* b, int64_t ldb,
                               float* pk, int64_t next, int ncols, int k, float alpha, float beta,
                               float* c, int64_t ldc, int cj0) {
  if (m <= kTileRows) pk = nullptr;  // one tile: nothing would reread a copy
  int m0 = 0;
  for (; m0 + kTileRows <= m; m0 += kTileRows) {
    NnTileAt<L, kTileRows, CV>(a, lda, m0, b, ldb, pk, next, ncols, k, alpha, beta, c, ldc, cj0);
  }
  // The last rows in one tile (a row at a time cost ~30% at M = 64).
  NnLastRows<L, kTileRows - 1, CV>(m - m0, a, lda, m0, b, ldb, pk, next, ncols, k, alpha, beta, c,
                                   ldc, cj0);
}

// B's rows are taken in blocks of kBlockBytes (contiguous, so a block sits
// in L2 without set conflicts); C collects the blocks' sums. Each strip's
// first tile prefetches the strip's rows of the next block.
constexpr int64_t kBlockBytes = 512 << 10;

// scratch: [k][CVMAX * L] for a strip's copy, then [k][L] for the tail.
template <int L, int CVMAX>
TANDEM_CPU_INLINE void NnRun(int m, int n, int k, float alpha, const float* a, int lda,
                             const float* b, int ldb, float beta, float* c, int ldc,
                             float* scratch) {
  float* pk = scratch;
  float* tail = scratch + static_cast<int64_t>(k) * CVMAX * L;
  const int block = static_cast<int>(
      std::max<int64_t>(16, kBlockBytes / (static_cast<int64_t>(ldb) * sizeof(float))));
  const int full = n / L * L;  // columns in whole vectors
  for (int p0 = 0; p0 < k && full > 0; p0 += block) {
    const int kb = std::min(block, k - p0);
    const int64_t next = p0 + block < k ? static_cast<int64_t>(block) * ldb : 0;
    const float* ab = a + p0;
    const float* bb = b + static_cast<int64_t>(p0) * ldb;
    const float bbeta = p0 == 0 ? beta : 1.f;  // later blocks add to C
    int j0 = 0;
    for (; j0 + CVMAX * L <= n; j0 += CVMAX * L) {
      NnStrip<L, CVMAX>(m, ab, lda, bb + j0, ldb, pk, next, CVMAX * L, kb, alpha, bbeta, c, ldc,
                        j0);
    }
    for (; j0 + L <= n; j0 += L) {
      NnStrip<L, 1>(m, ab, lda, bb + j0, ldb, pk, next, L, kb, alpha, bbeta, c, ldc, j0);
    }
  }
  if (full == n) return;
  // The last n - full < L columns: B's copied into `tail` [k][L], zero-padded.
  const int cols = n - full;
  for (int p = 0; p < k; ++p) {
    std::memcpy(tail + p * L, b + static_cast<int64_t>(p) * ldb + full, cols * sizeof(float));
    std::memset(tail + p * L + cols, 0, (L - cols) * sizeof(float));
  }
  NnStrip<L, 1>(m, a, lda, tail, L, nullptr, 0, cols, k, alpha, beta, c, ldc, full);
}

#define TANDEM_SMALL_M_ARGS                                                                        \
  (int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta, \
   float* c, int ldc, float* scratch)
#define TANDEM_SMALL_M_PASS (m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch)

TANDEM_CPU_TARGET_AVX512 void NtAvx512 TANDEM_SMALL_M_ARGS { NtRun<16, 4> TANDEM_SMALL_M_PASS; }
TANDEM_CPU_TARGET_AVX2 void NtAvx2 TANDEM_SMALL_M_ARGS { NtRun<8, 2> TANDEM_SMALL_M_PASS; }
TANDEM_CPU_TARGET_AVX512 void NnAvx512 TANDEM_SMALL_M_ARGS { NnRun<16, 4> TANDEM_SMALL_M_PASS; }
// No AVX2 build of NN: at 64 x 1024 x 1024 every tile shape tried (2 x 6,
// 3 x 4, 2 x 5, 4 x 3, 1 x 12 vectors x rows) was 4-30% slower than
// OpenBLAS's Haswell kernels with their packing.

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

bool SmallMGemmNNApplies(int m, int n, int k) {
  return SmallMGemmApplies(m, n, k) && Lanes() == 16;
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
  if (!SmallMGemmNNApplies(m, n, k)) return false;
  // A strip's copy ([k][4 vectors]) and the tail's ([k][1 vector]).
  float* buf = Scratch(scratch, static_cast<size_t>(k) * (4 * 16 + 16));
  NnAvx512(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, buf);
  return true;
}

}  // namespace cpu_internal
}  // namespace kernels
}  // namespace tandem
