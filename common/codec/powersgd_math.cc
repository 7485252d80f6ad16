#include "common/codec/powersgd_math.h"

#include <cblas.h>

#include <cmath>

#include "common/numeric/mix64.h"

namespace tandem {
namespace codec {
namespace {

using numeric::Mix64;

// (0, 1]: never 0, so the logarithm is finite.
double Uniform(uint64_t seed, uint64_t i) {
  return (static_cast<double>(Mix64(seed ^ Mix64(i + 0x9e3779b97f4a7c15ull)) >> 11) + 1.0) /
         9007199254740992.0;
}

}  // namespace

MatrixView ViewAsMatrix(const std::vector<int64_t>& shape) {
  MatrixView v;
  if (shape.empty()) return {1, 1};
  v.rows = shape[0];
  v.cols = 1;
  for (size_t i = 1; i < shape.size(); ++i) v.cols *= shape[i];
  return v;
}

bool PowerSgdCompresses(MatrixView m, int r, double min_compression) {
  if (r < 1 || m.rows < 2 || m.cols < 2) return false;
  return static_cast<double>(m.rows) * static_cast<double>(m.cols) >=
         min_compression * static_cast<double>(m.rows + m.cols) * r;
}

void FillStandardNormal(uint64_t seed, float* x, int64_t n) {
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < n; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(Uniform(seed, 2 * i)));
    const double angle = kTwoPi * Uniform(seed, 2 * i + 1);
    x[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < n) x[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

void ProjectP(const float* m, int64_t rows, int64_t cols, const float* qt, int r, float* pt) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, rows, cols, 1.f, qt, cols, m, cols,
              0.f, pt, rows);
}

void ProjectQ(const float* m, int64_t rows, int64_t cols, const float* pt, int r, float* qt) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, cols, rows, 1.f, pt, rows, m, cols,
              0.f, qt, cols);
}

void Reconstruct(const float* pt, const float* qt, int64_t rows, int64_t cols, int r, float* out) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, cols, r, 1.f, pt, rows, qt, cols,
              0.f, out, cols);
}

void OrthonormalizeRows(float* pt, int r, int64_t n) {
  for (int i = 0; i < r; ++i) {
    float* row = pt + i * n;
    double sq = 0;
    for (int64_t k = 0; k < n; ++k) sq += static_cast<double>(row[k]) * row[k];
    const float inv = static_cast<float>(1.0 / (std::sqrt(sq) + 1e-8));
    for (int64_t k = 0; k < n; ++k) row[k] *= inv;
    for (int j = i + 1; j < r; ++j) {
      float* other = pt + j * n;
      double dot = 0;
      for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(row[k]) * other[k];
      const float d = static_cast<float>(dot);
      for (int64_t k = 0; k < n; ++k) other[k] -= d * row[k];
    }
  }
}

}  // namespace codec
}  // namespace tandem
