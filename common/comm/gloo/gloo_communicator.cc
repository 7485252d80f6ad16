#include "common/comm/gloo/gloo_communicator.h"

#include <signal.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "common/comm/gloo/peer_addresses.h"
#include "common/comm/peer_exited.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/device.h"

// Defined in libgloo (see FailTcpPair below).
extern std::exception_ptr TandemGlooTcpPairSignalExceptionExternal(
    void* pair, const std::string& message) __asm__(
    "_ZN4gloo9transport3tcp4Pair23signalExceptionExternalERKNSt7__cxx1112basic_"
    "stringIcSt11char_traitsIcESaIcEEE");

namespace tandem {
namespace {

// Gloo reports timeouts as IoException with "Timed out" in the text. Any
// other error that names a peer's address is that pair's connection
// breaking: the rank is named (PeerConnectionBrokeText) so the worker can
// report it to the coordinator, which confirms the death or not.
absl::Status FromGloo(const std::exception& e, absl::string_view op, int rank,
                      const std::vector<std::string>& peers = {}) {
  const std::string what = e.what();
  std::string msg = absl::StrCat("gloo ", op, " on rank ", rank, " failed: ", what);
  if (what.find("imed out") != std::string::npos) return absl::DeadlineExceededError(msg);
  if (const int peer = PeerNamedIn(peers, what); peer >= 0) {
    absl::StrAppend(&msg, " (", PeerConnectionBrokeText(peer), ")");
  }
  return absl::UnavailableError(msg);
}

std::chrono::milliseconds Ms(absl::Duration d) { return absl::ToChronoMilliseconds(d); }

// Gloo fails a pair (and every operation waiting on it: its pending sends
// and receives throw) through tcp::Pair::signalExceptionExternal, which
// takes the pair's lock: what its own buffers call on a timeout. Debian's
// libgloo-dev ships gloo/transport/tcp/pair.h without the gloo/common/
// memory.h it includes, so the class cannot be named here; the exported
// member is called through its mangled name instead (Itanium ABI: the
// returned exception_ptr's slot first, then `this`, as for a free function
// with `this` as its first parameter). Only for pairs whose dynamic type is
// tcp::Pair, whose first base (offset 0) is transport::Pair.

bool FailTcpPair(gloo::transport::Pair* pair, const std::string& message) {
  if (pair == nullptr) return false;
  if (std::string(typeid(*pair).name()) != "N4gloo9transport3tcp4PairE") return false;
  (void)TandemGlooTcpPairSignalExceptionExternal(static_cast<void*>(pair), message);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", options.rank, " is not in a world of ", options.world_size,
        " (need 0 <= rank < world_size)"));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("gloo: a rendezvous store is required");
  }
  // Gloo writes to TCP sockets without MSG_NOSIGNAL: a peer that dies
  // would kill this process with SIGPIPE instead of giving us an error.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { ::signal(SIGPIPE, SIG_IGN); });
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<std::string> peers;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(Ms(options.timeout));
    gloo::rendezvous::PrefixStore store(options.prefix, *options.store);
    RecordingStore recording(&store);
    context->connectFullMesh(recording, device);
    peers = PeerAddresses(recording, options.rank, options.world_size);
  } catch (const std::exception& e) {
    return FromGloo(e, "connect", options.rank);
  }
  std::unique_ptr<GlooCommunicator> comm(new GlooCommunicator(
      std::move(context), options.rank, options.world_size, options.timeout));
  comm->peers_ = std::move(peers);
  // A rank's connectFullMesh can return while a peer is still connecting;
  // if this rank then closed its pairs (a generation that ends at once) the
  // peer would fail. The barrier makes Create return only once every rank's
  // mesh is complete.
  if (absl::Status s = comm->Barrier(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("gloo connect: ", s.message()));
  }
  return comm;
}

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank,
                                   int world_size, absl::Duration timeout)
    : context_(std::move(context)), rank_(rank), world_size_(world_size), timeout_(timeout) {}

void GlooCommunicator::Abort(const std::string& reason) {
  bool expected = false;
  if (!abort_reason_claimed_.compare_exchange_strong(expected, true)) return;
  abort_reason_ = reason.empty() ? "aborted by the caller" : reason;
  abort_requested_.store(true, std::memory_order_release);
  const std::string message = absl::StrCat("aborted: ", abort_reason_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    try {
      FailTcpPair(context_->getPair(r).get(), message);
    } catch (const std::exception&) {
      // A pair that is already closed or failed has nothing left to wake.
    }
  }
}

template <typename Options, typename Fill, typename Run, typename Describe>
absl::Status GlooCommunicator::Collective(Fill fill, Run run, Describe describe) {
  auto aborted = [&] {
    return absl::AbortedError(
        absl::StrCat("gloo ", describe(), " on rank ", rank_, " aborted: ", abort_reason_));
  };
  if (abort_requested_.load(std::memory_order_acquire)) return aborted();
  try {
    Options opts(context_);
    fill(opts);
    opts.setTag(NextTag());
    opts.setTimeout(Ms(timeout_));
    run(opts);
  } catch (const std::exception& e) {
    if (abort_requested_.load(std::memory_order_acquire)) return aborted();
    return FromGloo(e, describe(), rank_, peers_);
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  if (count == 0 || world_size_ == 1) return absl::OkStatus();
  using ReduceFn = void (*)(void*, const void*, const void*, size_t);
  const ReduceFn fn = op == ReduceOp::kSum ? static_cast<ReduceFn>(&gloo::sum<float>)
                                           : static_cast<ReduceFn>(&gloo::max<float>);
  return Collective<gloo::AllreduceOptions>(
      [&](gloo::AllreduceOptions& o) {
        o.setOutput(data, static_cast<size_t>(count));
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction(fn);
      },
      [](const gloo::AllreduceOptions& o) { gloo::allreduce(o); },
      [&] { return absl::StrCat("allreduce of ", count, " floats"); });
}

// The pipelined ring of ReduceScatter over the accumulator `acc` (N
// blocks of `count`), receiving into incoming[step % 2]; gloo's exceptions
// propagate to the caller.
void GlooCommunicator::RingReduceScatter(float* acc, float* const incoming[2], int64_t count) {
  const int64_t n = world_size_;
  const int64_t count_per_rank = count;
  const int right = static_cast<int>((rank_ + 1) % n);
  const int left = static_cast<int>((rank_ + n - 1) % n);
  auto mod = [n](int64_t v) { return ((v % n) + n) % n; };
  const int64_t seg = std::min<int64_t>(count_per_rank, kReduceScatterSegmentFloats);
  const int64_t segments = (count_per_rank + seg - 1) / seg;
  const int64_t steps = n - 1;
  auto seg_len = [&](int64_t k) { return std::min(seg, count_per_rank - k * seg); };
  constexpr int64_t kF = sizeof(float);
  auto send = context_->createUnboundBuffer(acc, kF * count * n);
  std::unique_ptr<gloo::transport::UnboundBuffer> recv[2] = {
      context_->createUnboundBuffer(incoming[0], kF * count_per_rank),
      context_->createUnboundBuffer(incoming[1], kF * count_per_rank)};
  const uint64_t slot =
      static_cast<uint64_t>(context_->nextSlot(static_cast<int>(steps * segments)));
  auto slot_of = [&](int64_t step, int64_t k) { return slot + step * segments + k; };
  auto post_recvs = [&](int64_t step) {
    for (int64_t k = 0; k < segments; ++k) {
      recv[step % 2]->recv(left, slot_of(step, k), k * seg * kF, seg_len(k) * kF);
    }
  };
  post_recvs(0);
  if (steps > 1) post_recvs(1);
  for (int64_t k = 0; k < segments; ++k) {
    send->send(right, slot_of(0, k), (mod(rank_ - 1) * count_per_rank + k * seg) * kF,
               seg_len(k) * kF);
  }
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t to_add = mod(rank_ - 2 - step);
    for (int64_t k = 0; k < segments; ++k) {
      recv[step % 2]->waitRecv(Ms(timeout_));
      float* dst = acc + to_add * count_per_rank + k * seg;
      const float* src = incoming[step % 2] + k * seg;
      const int64_t len = seg_len(k);
      for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
      // The block just summed is the next step's to send.
      if (step + 1 < steps) {
        send->send(right, slot_of(step + 1, k), (to_add * count_per_rank + k * seg) * kF,
                   len * kF);
      }
    }
    // This parity's block is consumed: the step after next may land there.
    if (step + 2 < steps) post_recvs(step + 2);
  }
  // Sends read blocks no later step writes; wait for them all once.
  for (int64_t i = 0; i < steps * segments; ++i) send->waitSend(Ms(timeout_));
}

absl::Status GlooCommunicator::ReduceScatter(const float* input, float* output,
                                             int64_t count_per_rank) {
  // Gloo 0.5's options API has no reduce-scatter, so this is the ring one
  // over its unbound buffers: n - 1 steps, in each every rank sends one
  // block to its right neighbour and adds the block from its left one, so
  // each rank sends (n - 1) / n of the buffer — half an allreduce. Block b
  // is rank b's slice; rank r ends holding block r (at step s it receives
  // block r - 2 - s, which its neighbour has summed over s + 1 ranks).
  // Pipelined in segments of kReduceScatterSegmentFloats: a segment summed
  // at step s goes out at once as step s + 1's, while later segments of
  // step s are still arriving, and the receives of the next two steps are
  // posted ahead (two incoming blocks, by step parity), so the link does
  // not idle between steps.
  const auto describe = [&] { return absl::StrCat("reduce-scatter of ", count_per_rank, " floats x ",
                                                  world_size_); };
  if (count_per_rank == 0) return absl::OkStatus();
  const int64_t n = world_size_;
  if (n == 1) {
    std::memmove(output, input, sizeof(float) * count_per_rank);
    return absl::OkStatus();
  }
  if (abort_requested_.load(std::memory_order_acquire)) {
    return absl::AbortedError(
        absl::StrCat("gloo ", describe(), " on rank ", rank_, " aborted: ", abort_reason_));
  }
  const int64_t total = count_per_rank * n;
  // Grown once to the largest buffer seen: the accumulator and two blocks.
  if (static_cast<int64_t>(scratch_.size()) < total + 2 * count_per_rank) {
    scratch_.resize(total + 2 * count_per_rank);
  }
  float* acc = scratch_.data();
  float* incoming[2] = {acc + total, acc + total + count_per_rank};
  std::memcpy(acc, input, sizeof(float) * total);
  try {
    RingReduceScatter(acc, incoming, count_per_rank);
  } catch (const std::exception& e) {
    if (abort_requested_.load(std::memory_order_acquire)) {
      return absl::AbortedError(
          absl::StrCat("gloo ", describe(), " on rank ", rank_, " aborted: ", abort_reason_));
    }
    return FromGloo(e, describe(), rank_, peers_);
  }
  std::memcpy(output, acc + rank_ * count_per_rank, sizeof(float) * count_per_rank);
  return absl::OkStatus();
}

absl::Status GlooCommunicator::AllGather(const void* input, void* output,
                                         int64_t bytes_per_rank) {
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (world_size_ == 1) {
    std::memmove(output, input, bytes_per_rank);
    return absl::OkStatus();
  }
  return Collective<gloo::AllgatherOptions>(
      [&](gloo::AllgatherOptions& o) {
        o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(input)), bytes_per_rank);
        o.setOutput(static_cast<uint8_t*>(output), bytes_per_rank * world_size_);
      },
      [](gloo::AllgatherOptions& o) { gloo::allgather(o); },
      [&] { return absl::StrCat("allgather of ", bytes_per_rank, " bytes"); });
}

absl::Status GlooCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank"));
  }
  if (bytes == 0 || world_size_ == 1) return absl::OkStatus();
  return Collective<gloo::BroadcastOptions>(
      [&](gloo::BroadcastOptions& o) {
        o.setOutput(static_cast<uint8_t*>(data), bytes);
        o.setRoot(root);
      },
      [](gloo::BroadcastOptions& o) { gloo::broadcast(o); },
      [&] { return absl::StrCat("broadcast of ", bytes, " bytes from ", root); });
}

absl::Status GlooCommunicator::AllToAll(const void* input, void* output,
                                        int64_t bytes_per_rank) {
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (world_size_ == 1) {
    std::memmove(output, input, bytes_per_rank);
    return absl::OkStatus();
  }
  return Collective<gloo::AlltoallOptions>(
      [&](gloo::AlltoallOptions& o) {
        o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(input)),
                   bytes_per_rank * world_size_);
        o.setOutput(static_cast<uint8_t*>(output), bytes_per_rank * world_size_);
      },
      [](gloo::AlltoallOptions& o) { gloo::alltoall(o); },
      [&] { return absl::StrCat("all-to-all of ", bytes_per_rank, " bytes per rank"); });
}

absl::Status GlooCommunicator::Barrier() {
  if (world_size_ == 1) return absl::OkStatus();
  return Collective<gloo::BarrierOptions>([](gloo::BarrierOptions&) {},
                                          [](gloo::BarrierOptions& o) { gloo::barrier(o); },
                                          [] { return std::string("barrier"); });
}

}  // namespace tandem
