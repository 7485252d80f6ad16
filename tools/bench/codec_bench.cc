// Codec kernel bandwidth on this machine's CPU, against memcpy: for every
// codec, encode, encode with error feedback (fused), decode and decode-add
// of N fp32 values (default 4M = 16 MiB, beyond the caches), as GB/s of
// fp32 input and as a fraction of memcpy's GB/s for the same 4N bytes. The
// issue's target is >= 50% of memcpy for the dense codecs. Best of REPS
// repetitions; one thread. Also prints the vector width the loops ran at.
//
//   bazel build -c opt //tools/bench:codec_bench
//   bazel-bin/tools/bench/codec_bench [--n 4194304] [--reps 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/codec/codec_factory.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace {

double BestSeconds(int reps, const std::function<void()>& f) {
  double best = 1e30;
  f();  // warm: page faults, caches
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

int Main(int argc, char** argv) {
  int64_t n = int64_t{1} << 22;
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--n") == 0) n = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  }
  std::vector<float> x(n), r(n, 0.f), y(n, 0.f), copy(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 1.f);
  for (float& v : x) v = d(rng);
  const double bytes = 4.0 * n;
  const double memcpy_s =
      BestSeconds(reps, [&] { std::memcpy(copy.data(), x.data(), n * sizeof(float)); });
  const double memcpy_gbs = bytes / memcpy_s / 1e9;
  std::printf("codec_bench: %lld fp32 values (%.0f MiB), best of %d, vector width %s\n",
              static_cast<long long>(n), bytes / (1 << 20), reps, numeric::VectorWidthName());
  std::printf("memcpy: %.2f GB/s\n", memcpy_gbs);
  std::printf("%-22s %12s %12s %12s %12s   (GB/s of fp32 input; x memcpy)\n", "codec", "encode",
              "encode+EF", "decode", "decode-add");
  struct Row {
    std::string label;
    codec::CodecConfig config;
  };
  std::vector<Row> rows;
  for (const char* name : {"int8", "fp16", "bf16", "topk", "threshold"}) {
    codec::CodecConfig c;
    c.codec = name;
    rows.push_back({name, c});
  }
  codec::CodecConfig stochastic;
  stochastic.rounding = "stochastic";
  rows.insert(rows.begin() + 1, {"int8 stochastic", stochastic});
  for (const Row& row : rows) {
    std::unique_ptr<codec::Codec> codec = *codec::CreateCodec(row.config);
    std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
    std::vector<float> ws(codec->WorkspaceFloats(n));
    codec::EncodeParams p;
    p.workspace = ws.data();
    p.threshold = 2.6f;  // ~1% of N(0, 1)
    const double enc = BestSeconds(reps, [&] { codec->Encode(x.data(), n, p, block.data()); });
    // Sparse codecs start from zero residuals each time (so the
    // threshold's density stays ~1%); that memset is timed too, so their
    // cell is a lower bound. Dense residuals stay bounded on their own.
    const bool reset = codec->sparse();
    const double ef = BestSeconds(reps, [&] {
      if (reset) std::memset(r.data(), 0, n * sizeof(float));
      codec->EncodeWithFeedback(x.data(), r.data(), n, p, block.data());
    });
    codec->Encode(x.data(), n, p, block.data());
    const double dec = BestSeconds(reps, [&] { codec->Decode(block.data(), n, y.data()); });
    const double add = BestSeconds(reps, [&] { codec->DecodeAdd(block.data(), n, y.data()); });
    auto cell = [&](double s) {
      static char buf[4][32];
      static int k = 0;
      char* out = buf[k++ % 4];
      std::snprintf(out, 32, "%5.2f (%.2f)", bytes / s / 1e9, bytes / s / 1e9 / memcpy_gbs);
      return out;
    };
    std::printf("%-22s %12s %12s %12s %12s\n", row.label.c_str(), cell(enc), cell(ef), cell(dec),
                cell(add));
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
