#include "common/codec/topk_codec.h"

#include <string>

#include "common/codec/sparse_block.h"

namespace tandem {
namespace codec {
namespace {

class TopkCodec final : public Codec {
 public:
  explicit TopkCodec(const TopkCodecOptions& o) : fraction_(o.fraction) {}
  std::string name() const override { return "topk"; }
  bool sparse() const override { return true; }
  int64_t MaxEncodedBytes(int64_t n) const override {
    return n == 0 ? 0 : sparse::kHeaderBytes + sparse::kPairBytes * sparse::KeepCount(fraction_, n);
  }
  int64_t WorkspaceFloats(int64_t n) const override { return sparse::WorkspaceFloats(n); }
  int64_t Encode(const float* x, int64_t n, const EncodeParams& p, uint8_t* out) const override {
    return sparse::EncodeLargest(x, n, sparse::KeepCount(fraction_, n), p.workspace, nullptr, out);
  }
  int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n, const EncodeParams& p,
                             uint8_t* out) const override {
    sparse::AddInto(x, n, residual);
    return sparse::EncodeLargest(residual, n, sparse::KeepCount(fraction_, n), p.workspace,
                                 residual, out);
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
  const double fraction_;
};

}  // namespace

std::unique_ptr<Codec> MakeTopkCodec(const TopkCodecOptions& options) {
  return std::make_unique<TopkCodec>(options);
}

}  // namespace codec
}  // namespace tandem
