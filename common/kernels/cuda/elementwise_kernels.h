// Element-wise and reduction kernels of the CUDA backend: fused bias +
// activation (forward and backward with the bias gradient), stand-alone
// activations, vector ops, sums of squares, the inf/NaN count, and
// fp32 <-> bf16 / fp16 casts. Semantics are exactly those of the Backend
// methods of the same name (common/kernels/backend.h); this header only adds
// the stream and the error return.
//
// Every launcher enqueues work on `stream` and returns the launch error
// (cudaGetLastError), never blocks, never allocates. Pointers are device
// memory. Thread-compatible: callers serialise use of a stream.
#ifndef TANDEM_COMMON_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
#define TANDEM_COMMON_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {

// Mirrors kernels::Activation (kept separate so .cu files need no absl).
// kSavedGrad (backward only): z already holds act'(pre-activation), as
// LaunchBiasActivationForwardKeepGrad leaves it, so act'(z) reads z as is.
enum class Act : int { kNone = 0, kRelu = 1, kGeluTanh = 2, kSavedGrad = 3 };

// z[r, c] += bias[c] (bias may be null), then y = act(z); y may alias z.
cudaError_t LaunchBiasActivationForward(Act act, int64_t rows, int64_t cols,
                                        const float* bias, float* z, float* y,
                                        cudaStream_t stream);
// With v = z + bias (bias may be null): y = act(v), z = act'(v); y must
// not alias z.
cudaError_t LaunchBiasActivationForwardKeepGrad(Act act, int64_t rows,
                                                int64_t cols, const float* bias,
                                                float* z, float* y,
                                                cudaStream_t stream);
// dz = dy * act'(z) (dz may alias dy; dz null writes nothing, which with
// Act::kNone and z = dy is a plain bias gradient); if dbias is non-null,
// dbias = dbias_beta * dbias + column sums of dz (dbias_beta == 0 ignores the
// old contents). Column sums use float atomics: not bit-reproducible.
cudaError_t LaunchBiasActivationBackward(Act act, int64_t rows, int64_t cols,
                                         const float* z, const float* dy,
                                         float* dz, float* dbias,
                                         float dbias_beta,
                                         cudaStream_t stream);
// y = act(x) on n elements (y may alias x).
cudaError_t LaunchActivationForward(Act act, int64_t n, const float* x,
                                    float* y, cudaStream_t stream);
// dx = dy * act'(x) (dx may alias dy).
cudaError_t LaunchActivationBackward(Act act, int64_t n, const float* x,
                                     const float* dy, float* dx,
                                     cudaStream_t stream);

// y = beta * y (y = 0 when beta == 0, whatever y held).
cudaError_t LaunchScaleOrZero(int64_t n, float beta, float* y,
                              cudaStream_t stream);
// x[0..n) = value.
cudaError_t LaunchFill(int64_t n, float value, float* x, cudaStream_t stream);
// y += alpha * x.
cudaError_t LaunchAxpy(int64_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream);
// out = a + b (out may alias a or b).
cudaError_t LaunchAdd(int64_t n, const float* a, const float* b, float* out,
                      cudaStream_t stream);
// x *= alpha.
cudaError_t LaunchScale(int64_t n, float alpha, float* x, cudaStream_t stream);

// *result = sum of x[i]^2, accumulated in double, then rounded to float.
// Deterministic: two passes (per-block partials into `scratch`, then one
// block adds them in a fixed order), no atomics, so the same vector gives
// the same bits on every run, device of the same model and rank (gradient
// clipping must agree across ranks). `scratch`: SumSquaresScratchDoubles()
// device doubles owned by the caller, not used concurrently by another
// stream.
cudaError_t LaunchSumSquares(int64_t n, const float* x, double* scratch,
                             float* result, cudaStream_t stream);
// The same sum left in double (the same partials, so the float result is
// exactly this one rounded); `result` is one device double.
cudaError_t LaunchSumSquaresF64(int64_t n, const float* x, double* scratch,
                                double* result, cudaStream_t stream);
// Size of LaunchSumSquares' scratch, in doubles (the largest grid).
int64_t SumSquaresScratchDoubles();
// *result = number of inf/NaN in x (as float), counted in `scratch` (one
// device unsigned long long owned by the caller).
cudaError_t LaunchCountNonFinite(int64_t n, const float* x,
                                 unsigned long long* scratch, float* result,
                                 cudaStream_t stream);

// Round-to-nearest-even casts; 16-bit values stored as uint16_t.
cudaError_t LaunchCastF32ToBf16(int64_t n, const float* x, uint16_t* y,
                                cudaStream_t stream);
cudaError_t LaunchCastBf16ToF32(int64_t n, const uint16_t* x, float* y,
                                cudaStream_t stream);
cudaError_t LaunchCastF32ToF16(int64_t n, const float* x, uint16_t* y,
                               cudaStream_t stream);
cudaError_t LaunchCastF16ToF32(int64_t n, const uint16_t* x, float* y,
                               cudaStream_t stream);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
