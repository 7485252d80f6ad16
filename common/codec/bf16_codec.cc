#include "common/codec/bf16_codec.h"

#include <cfloat>
#include <cmath>
#include <string>

#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/precision.h"

namespace tandem {
namespace codec {
namespace {

TANDEM_CPU_INLINE void Bf16EncodeBody(const float* __restrict x, int64_t n,
                                      uint16_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = numeric::FloatToBf16(x[i]);
}
TANDEM_CPU_DISPATCHED(Bf16Encode, (const float* __restrict x, int64_t n, uint16_t* __restrict out),
                      (x, n, out))

TANDEM_CPU_INLINE void Bf16EncodeFeedbackBody(const float* __restrict x, float* __restrict r,
                                              int64_t n, uint16_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + r[i];
    const uint16_t h = numeric::FloatToBf16(v);
    out[i] = h;
    const float d = v - numeric::Bf16ToFloat(h);
    r[i] = std::fabs(d) <= FLT_MAX ? d : 0.f;
  }
}
TANDEM_CPU_DISPATCHED(Bf16EncodeFeedback,
                      (const float* __restrict x, float* __restrict r, int64_t n,
                       uint16_t* __restrict out),
                      (x, r, n, out))

TANDEM_CPU_INLINE void Bf16DecodeBody(const uint16_t* __restrict in, int64_t n, bool add,
                                      float* __restrict out) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] = out[i] + numeric::Bf16ToFloat(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = numeric::Bf16ToFloat(in[i]);
  }
}
TANDEM_CPU_DISPATCHED(Bf16Decode,
                      (const uint16_t* __restrict in, int64_t n, bool add, float* __restrict out),
                      (in, n, add, out))

class Bf16Codec final : public Codec {
 public:
  std::string name() const override { return "bf16"; }
  bool sparse() const override { return false; }
  int64_t MaxEncodedBytes(int64_t n) const override { return 2 * n; }
  int64_t Encode(const float* x, int64_t n, const EncodeParams&, uint8_t* out) const override {
    Bf16Encode(x, n, reinterpret_cast<uint16_t*>(out));
    return 2 * n;
  }
  int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n, const EncodeParams&,
                             uint8_t* out) const override {
    Bf16EncodeFeedback(x, residual, n, reinterpret_cast<uint16_t*>(out));
    return 2 * n;
  }
  void Decode(const uint8_t* in, int64_t n, float* out) const override {
    Bf16Decode(reinterpret_cast<const uint16_t*>(in), n, false, out);
  }
  void DecodeAdd(const uint8_t* in, int64_t n, float* out) const override {
    Bf16Decode(reinterpret_cast<const uint16_t*>(in), n, true, out);
  }
};

}  // namespace

std::unique_ptr<Codec> MakeBf16Codec() { return std::make_unique<Bf16Codec>(); }

}  // namespace codec
}  // namespace tandem
