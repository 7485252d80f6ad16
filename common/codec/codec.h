// Codec: a stateless gradient compressor for the `compressed` strategy
// (compressed_sync.h). It turns n fp32 values into at most
// MaxEncodedBytes(n) bytes and back. Implementations, one file each:
// int8 (per-chunk scale, nearest or stochastic rounding; int8_codec.h),
// fp16 / bf16 (half_codecs.h), top-k and threshold (index + value pairs;
// sparse_codecs.h). Error feedback is not a codec: ErrorFeedback
// (error_feedback.h) wraps any codec and keeps the residuals; the adaptive
// threshold's state lives in ThresholdController (threshold_controller.h).
//
//   std::unique_ptr<Codec> c = MakeInt8Codec({.chunk = 1024});
//   std::vector<uint8_t> block(c->MaxEncodedBytes(n));
//   int64_t bytes = c->Encode(x, n, EncodeParams{}, block.data());
//   c->DecodeAdd(block.data(), n, sum);  // sum[i] += decoded[i]
//
// Encodings are byte strings that every rank decodes to the same floats
// whatever its CPU (the kernels are built with -ffp-contract=off), so ranks
// that decode the same bytes hold identical values. A dense codec's block
// size depends only on n; a sparse block starts with a small header (count
// of pairs, smallest kept magnitude) and is padded to MaxEncodedBytes(n) by
// whoever must send equal sizes.
//
// Thread-safety: codecs are immutable; any method may be called from any
// number of threads at once (callers give each call its own buffers).
// Ownership: every pointer is caller-owned and only used during the call.
// Failure: none at run time: sizes are the caller's contract (checked with
// DCHECK); options are checked when a codec is made (codec_factory.h).
// Non-finite inputs encode to non-finite outputs (the loss scaler sees
// them); EncodeWithFeedback never leaves a non-finite residual.
#ifndef TANDEM_COMMON_CODEC_CODEC_H_
#define TANDEM_COMMON_CODEC_CODEC_H_

#include <cstdint>
#include <string>

namespace tandem {
namespace codec {

// Per-call inputs (all optional). Codecs read only what they use.
struct EncodeParams {
  // Stochastic rounding (int8 with rounding = stochastic): the dither of
  // element i is a hash of (seed, i), so the same call gives the same bytes.
  uint64_t seed = 0;
  // Threshold codec: keep |x| >= threshold (<= 0: keep the codec's target
  // density of largest magnitudes, how a controller starts).
  float threshold = 0;
  // Sparse codecs: WorkspaceFloats(n) floats of scratch (selection).
  float* workspace = nullptr;
};

class Codec {
 public:
  virtual ~Codec() = default;

  // "int8", "fp16", "bf16", "topk", "threshold".
  virtual std::string name() const = 0;
  // Sparse blocks hold (index, value) pairs; they are summed by an
  // allgather of blocks, dense ones by all-to-all + allgather.
  virtual bool sparse() const = 0;

  // Upper bound (dense: exact size) of an encoding of n values; 0 for n = 0.
  virtual int64_t MaxEncodedBytes(int64_t n) const = 0;
  // Scratch EncodeParams::workspace must hold for n values (0: none).
  virtual int64_t WorkspaceFloats(int64_t n) const { return 0; }

  // Encodes x[0, n) into out (MaxEncodedBytes(n) bytes); returns the bytes
  // written.
  virtual int64_t Encode(const float* x, int64_t n, const EncodeParams& params,
                         uint8_t* out) const = 0;
  // Error feedback fused into the encode, in one pass over the data:
  // v = x + residual, out = Encode(v), residual = v - Decode(out) (a
  // non-finite difference becomes 0). Returns the bytes written.
  virtual int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n,
                                     const EncodeParams& params, uint8_t* out) const = 0;
  // out[0, n) = the values `in` encodes (zeros where a sparse block has none).
  virtual void Decode(const uint8_t* in, int64_t n, float* out) const = 0;
  // out[i] += decoded value i, in fp32 (sparse: only the pairs' indices).
  virtual void DecodeAdd(const uint8_t* in, int64_t n, float* out) const = 0;
  // out[i] = 0 for every value the block `in` (of n values) carries: a
  // sparse block's indices (read from the block, not inferred from the
  // values); a dense block carries every value, so all of out[0, n).
  // Momentum factor masking (ErrorFeedback) uses it.
  virtual void ZeroSent(const uint8_t* in, int64_t n, float* out) const {
    for (int64_t i = 0; i < n; ++i) out[i] = 0.f;
  }
};

}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_CODEC_H_
