// GEMMs with few rows (a training batch of M <= 128) against a large
// row-major matrix B that is read in place, never packed: Linear's forward
// Y = X W^T and its input gradient dX = dY W at the MLP's batch sizes.
//
// Why: OpenBLAS packs both operands of every call. At M = 64 that means the
// whole 3-4 MB weight is copied (a memory-bound pass) for a product that
// reads it once: measured as 1.7-1.9 ms of a 12 ms rank-step of
// mlp:784,1024,1024,10 (docs/benchmarks.md, the MLP section). Here B is
// read from memory once:
//  - SmallMGemmNT, C[m x n] = alpha A[m x k] B[n x k]^T + beta C: A is
//    packed transposed ([k][m], padded to whole vectors; M x K floats, L2
//    resident), then a register tile of R rows of B x up to 64 rows of A
//    broadcasts B's entries and multiplies whole vectors of A^T, so no
//    horizontal sums are needed; B's rows stream once from memory.
//  - SmallMGemmNN, C[m x n] = alpha A[m x k] B[k x n] + beta C: the
//    broadcast-FMA form over B's rows, a tile of 6 rows of A x 4 vectors of
//    columns in registers. B is taken in 512 KB blocks of whole rows
//    (contiguous, so a block sits in L2 without the set conflicts of a
//    column strip whose rows are a page apart); within a block, each
//    64-column strip is copied into an L1-sized buffer by its first row
//    tile (which also prefetches the strip's rows of the next block) and
//    reused by the others; C collects the blocks' sums.
// C is written without a zeroing pass (beta = 0 never reads it).
//
// They run at the CPU's widest vector unit (cpu_dispatch's compute width,
// which tests can force narrower): NT at AVX-512 or AVX2+FMA, NN at
// AVX-512 only (its AVX2 build lost to OpenBLAS's Haswell kernels). They
// return false, touching nothing, when they do not apply: no such width,
// M > 128, or B small (below kSmallMMinB entries, where OpenBLAS's packing
// is cheap). The caller then runs OpenBLAS.
//
// Thread-compatible: `scratch` is the caller's (grown on first use to the
// largest size seen, about M x K or 80 x K floats, then reused, so
// steady-state calls do not allocate). Results are deterministic (a fixed
// summation order per shape) but not bitwise OpenBLAS's.
#ifndef TANDEM_COMMON_KERNELS_CPU_SMALL_M_GEMM_H_
#define TANDEM_COMMON_KERNELS_CPU_SMALL_M_GEMM_H_

#include <cstdint>
#include <vector>

namespace tandem {
namespace kernels {
namespace cpu_internal {

// Largest M these kernels take.
constexpr int kSmallMMaxRows = 128;
// Smallest B (n * k entries) they take: 512 KB of fp32.
constexpr int64_t kSmallMMinB = int64_t{1} << 17;

// Whether SmallMGemmNT / SmallMGemmNN would run for this shape on this CPU
// at the current vector width.
bool SmallMGemmApplies(int m, int n, int k);
bool SmallMGemmNNApplies(int m, int n, int k);

// C = alpha A B^T + beta C, A [m x k] (lda), B [n x k] (ldb), C [m x n]
// (ldc), all row-major. false (nothing done) when !SmallMGemmApplies.
bool SmallMGemmNT(int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, std::vector<float>* scratch);

// C = alpha A B + beta C, A [m x k] (lda), B [k x n] (ldb), C [m x n]
// (ldc), all row-major. false (nothing done) when !SmallMGemmNNApplies.
bool SmallMGemmNN(int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, std::vector<float>* scratch);

}  // namespace cpu_internal
}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CPU_SMALL_M_GEMM_H_
