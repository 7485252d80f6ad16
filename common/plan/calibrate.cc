#include "common/plan/calibrate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_factory.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/plan/model_cost.h"
#include "common/plan/ring_round.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace plan {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status Errno(const char* what) {
  return absl::UnavailableError(absl::StrCat("calibrate: ", what, ": ", std::strerror(errno)));
}

// Closes on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool SendAll(int fd, const char* p, int64_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 20)), 0);
    if (k <= 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

bool RecvAll(int fd, char* p, int64_t n) {
  while (n > 0) {
    const ssize_t k = recv(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 20)), 0);
    if (k <= 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

}  // namespace

absl::StatusOr<double> MeasureModelFlops(const std::string& model, int batch, int repetitions) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = batch;
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> m, nn::CreateModel(model, &backend, mo));
  ASSIGN_OR_RETURN(ModelCost cost, ModelCostOf(m->spec()));
  const nn::ModelSpec& spec = m->spec();
  std::mt19937 rng(1);
  std::vector<float> features;
  std::vector<int32_t> tokens, labels;
  nn::Batch b;
  b.size = batch;
  if (spec.kind == nn::ModelSpec::Kind::kMlp) {
    features.resize(static_cast<size_t>(batch) * spec.mlp.widths.front());
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& f : features) f = u(rng);
    labels.resize(batch);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % spec.mlp.widths.back());
    b.features = features.data();
  } else {
    tokens.resize(static_cast<size_t>(batch) * spec.gpt.context);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % spec.gpt.vocab);
    labels = tokens;
    b.tokens = tokens.data();
  }
  b.labels = labels.data();
  // One untimed step warms the caches and BLAS's buffers.
  std::vector<double> secs;
  for (int r = 0; r <= repetitions; ++r) {
    const double t0 = Now();
    RETURN_IF_ERROR(m->Forward(b));
    RETURN_IF_ERROR(m->Backward(0.0f, nullptr, 1.0f));
    if (r > 0) secs.push_back(Now() - t0);
  }
  return cost.train_flops * batch / Median(secs);
}

double MeasureStreamBytesPerSecond(int64_t bytes, int repetitions) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> secs;
  for (int r = 0; r <= repetitions; ++r) {
    const double t0 = Now();
    std::memcpy(b.data(), a.data(), a.size());
    if (r > 0) secs.push_back(Now() - t0);
    std::swap(a, b);
  }
  return 2.0 * bytes / Median(secs);  // read + write
}

absl::StatusOr<LoopbackRates> MeasureLoopback(int64_t bytes, int repetitions) {
  Fd listener{socket(AF_INET, SOCK_STREAM, 0)};
  if (listener.fd < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return Errno("bind");
  if (listen(listener.fd, 1) != 0) return Errno("listen");
  socklen_t len = sizeof(addr);
  if (getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("getsockname");
  }
  Fd client{socket(AF_INET, SOCK_STREAM, 0)};
  if (client.fd < 0) return Errno("socket");
  if (connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Errno("connect");
  }
  Fd server{accept(listener.fd, nullptr, nullptr)};
  if (server.fd < 0) return Errno("accept");
  const int one = 1;
  setsockopt(client.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(server.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  // The peer echoes one byte per ping, then drains each bulk transfer and
  // acknowledges it with one byte.
  const int pings = 200;
  bool peer_ok = true;
  std::thread peer([&] {
    std::vector<char> sink(1 << 20);
    char c = 0;
    for (int i = 0; i < pings && peer_ok; ++i) {
      peer_ok = RecvAll(server.fd, &c, 1) && SendAll(server.fd, &c, 1);
    }
    for (int r = 0; r <= repetitions && peer_ok; ++r) {
      int64_t left = bytes;
      while (left > 0 && peer_ok) {
        const int64_t k = std::min<int64_t>(left, static_cast<int64_t>(sink.size()));
        peer_ok = RecvAll(server.fd, sink.data(), k);
        left -= k;
      }
      peer_ok = peer_ok && SendAll(server.fd, &c, 1);
    }
  });
  LoopbackRates rates;
  bool ok = true;
  std::vector<double> rtts;
  char c = 7;
  for (int i = 0; i < pings && ok; ++i) {
    const double t0 = Now();
    ok = SendAll(client.fd, &c, 1) && RecvAll(client.fd, &c, 1);
    rtts.push_back(Now() - t0);
  }
  std::vector<char> data(bytes, 3);
  std::vector<double> secs;
  for (int r = 0; r <= repetitions && ok; ++r) {
    const double t0 = Now();
    ok = SendAll(client.fd, data.data(), bytes) && RecvAll(client.fd, &c, 1);
    if (r > 0) secs.push_back(Now() - t0);
  }
  shutdown(client.fd, SHUT_RDWR);
  peer.join();
  if (!ok || !peer_ok) return Errno("loopback transfer");
  rates.round_trip_s = Median(rtts);
  rates.bytes_per_s = bytes / Median(secs);
  return rates;
}

absl::StatusOr<double> MeasureCodecBytesPerSecond(int64_t values, int repetitions) {
  codec::CodecConfig config;  // int8, the strategy's default chunk
  ASSIGN_OR_RETURN(std::unique_ptr<codec::Codec> codec, codec::CreateCodec(config));
  std::vector<float> x(values), residual(values, 0.f), decoded(values);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> encoded(codec->MaxEncodedBytes(values));
  std::vector<double> secs;
  for (int r = 0; r <= repetitions; ++r) {
    const double t0 = Now();
    // What compressed runs per byte of gradient: an encode with feedback
    // and a decode (dequantize-add of the sums is the same pass again).
    codec->EncodeWithFeedback(x.data(), residual.data(), values, {}, encoded.data());
    codec->Decode(encoded.data(), values, decoded.data());
    if (r > 0) secs.push_back(Now() - t0);
  }
  // Rate per pass (the cost model charges passes at this rate).
  return 2.0 * values * sizeof(float) / Median(secs);
}

absl::StatusOr<MachineProfile> Calibrate(const CalibrateOptions& o) {
  constexpr int kRingAllReduces = 10;
  if (o.batch < 1 || o.repetitions < 1) {
    return absl::InvalidArgumentError("calibrate: batch and repetitions must be at least 1");
  }
  MachineProfile p;
  ASSIGN_OR_RETURN(p.gemm_flops_per_s, MeasureModelFlops(o.model, o.batch, o.repetitions));
  p.stream_bytes_per_s = MeasureStreamBytesPerSecond(o.stream_bytes, o.repetitions);
  ASSIGN_OR_RETURN(LoopbackRates l, MeasureLoopback(o.loopback_bytes, o.repetitions));
  p.loopback_bytes_per_s = l.bytes_per_s;
  p.link_alpha_s = l.round_trip_s;
  // A round of tandem's rings (Gloo over loopback TCP between processes)
  // at 2, 4, 8 and 16 ranks: wake-ups, hand-offs and the scheduler's delay
  // under the machine's load, which the one-socket ping above misses (5 us
  // there; 0.7-5 ms here at load 20, and not monotonic in the ranks).
  for (auto [ranks, wall, cpu] :
       {std::tuple{2, &p.ring_round_2_s, &p.ring_round_cpu_2_s},
        {4, &p.ring_round_4_s, &p.ring_round_cpu_4_s},
        {8, &p.ring_round_8_s, &p.ring_round_cpu_8_s},
        {16, &p.ring_round_16_s, &p.ring_round_cpu_16_s}}) {
    ASSIGN_OR_RETURN(RingRound round, MeasureRingRound(ranks, kRingAllReduces, o.repetitions));
    *wall = round.round_s;
    *cpu = round.cpu_s;
  }
  ASSIGN_OR_RETURN(p.codec_bytes_per_s,
                   MeasureCodecBytesPerSecond(o.stream_bytes / 4, o.repetitions));
  p.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  p.source = absl::StrCat("measured by tandem plan --calibrate (", o.model, ", batch ", o.batch,
                          ")");
  return p;
}

}  // namespace plan
}  // namespace tandem
