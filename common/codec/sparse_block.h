// Internal to the sparse codecs (topk_codec, threshold_codec): the block
// layout and the selection both share. A block for n values is
//   uint32 count | float min_kept | count x (uint32 index, float value)
// with indices ascending; MaxEncodedBytes = 8 + 8 * capacity. min_kept is
// the smallest magnitude kept (0 when none): what ThresholdController
// starts from. Pure functions; pointers are the caller's.
#ifndef TANDEM_COMMON_CODEC_SPARSE_BLOCK_H_
#define TANDEM_COMMON_CODEC_SPARSE_BLOCK_H_

#include <cstdint>

namespace tandem {
namespace codec {
namespace sparse {

constexpr int64_t kHeaderBytes = 8;
constexpr int64_t kPairBytes = 8;

struct Header {
  int64_t count = 0;
  float min_kept = 0;
};
Header ReadHeader(const uint8_t* block);

// How many of n values a fraction keeps: ceil(fraction * n) in [1, n]
// (0 for n = 0).
int64_t KeepCount(double fraction, int64_t n);

constexpr int64_t kHistogramBins = 1 << 16;
// Scratch the selection needs for n values (n + kHistogramBins floats).
int64_t WorkspaceFloats(int64_t n);

// Encodes the k largest magnitudes of v[0, n) (ties: lowest indices first;
// NaN counts as the largest) into out; workspace holds WorkspaceFloats(n). When
// `residual` is set it holds v on entry and leaves with the kept values
// zeroed (what was sent is no longer owed) and non-finite ones zeroed.
// Returns the bytes written.
int64_t EncodeLargest(const float* v, int64_t n, int64_t k, float* workspace, float* residual,
                      uint8_t* out);
// Encodes every |v| >= threshold (threshold > 0) if there are at most
// `capacity`, else the `capacity` largest. `residual` and workspace as above.
int64_t EncodeAbove(const float* v, int64_t n, float threshold, int64_t capacity,
                    float* workspace, float* residual, uint8_t* out);

// residual[i] = x[i] + residual[i] (the error-feedback input, in place).
void AddInto(const float* x, int64_t n, float* residual);

void Decode(const uint8_t* in, int64_t n, float* out);
// Pairs whose index is not below n are ignored (a corrupt block cannot
// write out of bounds).
void DecodeAdd(const uint8_t* in, int64_t n, float* out);
// out[i] = 0 for every pair's index i (indices not below n are ignored).
void ZeroAt(const uint8_t* in, int64_t n, float* out);

}  // namespace sparse
}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_SPARSE_BLOCK_H_
