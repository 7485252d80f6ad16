#include "common/codec/threshold_codec.h"

#include <algorithm>
#include <string>

#include "common/codec/sparse_block.h"

namespace tandem {
namespace codec {
namespace {

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(const ThresholdCodecOptions& o)
      : density_(o.density), max_density_(o.max_density) {}
  std::string name() const override { return "threshold"; }
  bool sparse() const override { return true; }
  int64_t MaxEncodedBytes(int64_t n) const override {
    return n == 0 ? 0 : sparse::kHeaderBytes + sparse::kPairBytes * Capacity(n);
  }
  int64_t WorkspaceFloats(int64_t n) const override { return sparse::WorkspaceFloats(n); }
  int64_t Encode(const float* x, int64_t n, const EncodeParams& p, uint8_t* out) const override {
    return Run(x, n, p, nullptr, out);
  }
  int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n, const EncodeParams& p,
                             uint8_t* out) const override {
    sparse::AddInto(x, n, residual);
    return Run(residual, n, p, residual, out);
  }
  void Decode(const uint8_t* in, int64_t n, float* out) const override {
    sparse::Decode(in, n, out);
  }
  void DecodeAdd(const uint8_t* in, int64_t n, float* out) const override {
    sparse::DecodeAdd(in, n, out);
  }
  void ZeroSent(const uint8_t* in, int64_t n, float* out) const override {
    sparse::ZeroAt(in, n, out);
  }

 private:
  int64_t Capacity(int64_t n) const {
    return std::max(sparse::KeepCount(max_density_, n), sparse::KeepCount(density_, n));
  }
  int64_t Run(const float* v, int64_t n, const EncodeParams& p, float* residual,
              uint8_t* out) const {
    if (!(p.threshold > 0)) {
      return sparse::EncodeLargest(v, n, sparse::KeepCount(density_, n), p.workspace, residual,
                                   out);
    }
    return sparse::EncodeAbove(v, n, p.threshold, Capacity(n), p.workspace, residual, out);
  }

  const double density_;
  const double max_density_;
};

}  // namespace

std::unique_ptr<Codec> MakeThresholdCodec(const ThresholdCodecOptions& options) {
  return std::make_unique<ThresholdCodec>(options);
}

}  // namespace codec
}  // namespace tandem
