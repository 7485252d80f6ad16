// PowerSGD's linear algebra (Vogels et al., NeurIPS'19), for the
// `compressed` strategy's codec=powersgd (common/sync/compressed/
// powersgd_sync.h): one step of power iteration that approximates a
// gradient matrix M (rows x cols, row-major) by P Q^T of rank r. The
// factors are kept transposed, as r rows each (Pt: r x rows, Qt: r x cols),
// so each factor column is contiguous:
//
//   ProjectP(m, rows, cols, qt, r, pt);     // Pt = Qt M^T      (P = M Q)
//   OrthonormalizeRows(pt, r, rows);        // Gram-Schmidt
//   ProjectQ(m, rows, cols, pt, r, qt);     // Qt = Pt M        (Q = M^T P)
//   Reconstruct(pt, qt, rows, cols, r, out) // out = Pt^T Qt    (P Q^T)
//
// The products go to OpenBLAS (cblas_sgemm, single call each); nothing is
// allocated. Deterministic: the same inputs give the same bits in one
// process, so ranks that hold the same summed factors reconstruct the same
// matrix. Thread-safe (pure functions on caller-owned buffers, which must
// not alias). No failure modes: sizes are the caller's contract.
#ifndef TANDEM_COMMON_CODEC_POWERSGD_MATH_H_
#define TANDEM_COMMON_CODEC_POWERSGD_MATH_H_

#include <cstdint>
#include <vector>

namespace tandem {
namespace codec {

// How PowerSGD views a parameter of `shape`: shape[0] rows by the product
// of the rest (a 1-D tensor is n x 1, which never compresses).
struct MatrixView {
  int64_t rows = 0;
  int64_t cols = 0;
};
MatrixView ViewAsMatrix(const std::vector<int64_t>& shape);

// Whether a rows x cols matrix is worth sending as rank-r factors: its
// elements are at least min_compression times the factors' (rows + cols) r.
// With min_compression >= 1 this also implies r < min(rows, cols).
bool PowerSgdCompresses(MatrixView m, int r, double min_compression);

// x[0, n) = N(0, 1) values from `seed` (Box-Muller over a counter hash:
// the same values on every machine and build).
void FillStandardNormal(uint64_t seed, float* x, int64_t n);

// Pt (r x rows) = Qt (r x cols) M^T.
void ProjectP(const float* m, int64_t rows, int64_t cols, const float* qt, int r, float* pt);
// Qt (r x cols) = Pt (r x rows) M.
void ProjectQ(const float* m, int64_t rows, int64_t cols, const float* pt, int r, float* qt);
// out (rows x cols) = Pt^T Qt.
void Reconstruct(const float* pt, const float* qt, int64_t rows, int64_t cols, int r, float* out);
// Modified Gram-Schmidt over the r rows of length n of pt: each row is
// made orthogonal to the ones before it and scaled to unit norm (a row of
// norm ~0 is scaled by 1 / (norm + 1e-8), so zeros stay zeros, never NaN).
void OrthonormalizeRows(float* pt, int r, int64_t n);

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_POWERSGD_MATH_H_
