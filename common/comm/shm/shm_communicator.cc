#include "common/comm/shm/shm_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <new>
#include <csignal>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/comm/peer_exited.h"
#include "common/comm/shm/reduce_slots.h"
#include "common/comm/shm/shm_segment.h"
#include "common/status/status_macros.h"

namespace tandem {

namespace {

constexpr uint64_t kMagic = 0x74616e64656d5348ULL;  // "tandemSH"
constexpr int64_t kPage = 4096;
// Longest single futex sleep: bounds how late a waiter notices an abort
// that raced with its going to sleep.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(50);
// Waits longer than this check whether peer processes are still alive.
constexpr absl::Duration kLivenessAfter = absl::Milliseconds(100);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration d) {
  struct timespec t = absl::ToTimespec(d);
  // Non-private: the word lives in memory shared between processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &t, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string Errno(int err) { return std::strerror(err); }

uint64_t PidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// True when `pid` has exited (gone, or a zombie its parent has not reaped).
bool ProcessExited(int32_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')'.
  const char* paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

}  // namespace

struct alignas(64) ShmCommunicator::Control {
  std::atomic<uint64_t> magic;
  int32_t world_size;
  int64_t chunk_bytes;
  // Barrier: arrivals in the current round; the round number (futex word);
  // ranks asleep on it (the last arrival wakes only when there are some).
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  std::atomic<uint32_t> sleepers;
  // 0, or 1 + the rank that gave up: the segment is dead.
  alignas(64) std::atomic<uint32_t> aborted;
  // Abort(): the first caller's reason (NUL-terminated), published by
  // reason_ready (release) before it marks the segment aborted.
  alignas(64) std::atomic<uint32_t> reason_claimed;
  std::atomic<uint32_t> reason_ready;
  char abort_reason[240];
};

// Who each rank is, for noticing a peer process that exited while others
// wait for it (written by each rank before the connect barrier).
struct ShmCommunicator::RankInfo {
  int32_t pid;
  uint64_t pid_namespace;
  // AllReduceSumOfSquares: this rank's share's sum of squares for the chunk
  // in flight, written between the chunk's two barriers and read by every
  // rank after the second (the next write waits for the next chunk's first
  // barrier, which no rank passes before it has read). Own cache line.
  alignas(64) double share_sum_sq;
};
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain lock-free 32-bit atomics");

ShmCommunicator::ShmCommunicator(int rank, int world_size, const ShmOptions& options)
    : rank_(rank), world_size_(world_size), timeout_(options.timeout) {
  chunk_bytes_ = (options.chunk_bytes + kPage - 1) / kPage * kPage;
  spin_iterations_ = options.spin_iterations;
  if (spin_iterations_ < 0) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    spin_iterations_ = world_size <= cpus ? 4000 : 16;
  }
  srcs_.resize(world_size);
}

ShmCommunicator::~ShmCommunicator() {
  if (base_ != nullptr) munmap(base_, map_bytes_);
}

namespace {

absl::Status CheckShmOptions(const ShmOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm: rank ", options.rank, " is not in a world of ", options.world_size,
        " (need 0 <= rank < world_size)"));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("shm: a rendezvous store is required");
  }
  if (options.chunk_bytes < 64 * options.world_size || options.chunk_bytes > (int64_t{1} << 34)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm: chunk_bytes ", options.chunk_bytes, " must be in [64 * world_size, 16 GiB]"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shm: timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmCommunicator>> ShmCommunicator::Create(
    const ShmOptions& options) {
  RETURN_IF_ERROR(CheckShmOptions(options));
  const absl::Time deadline = absl::Now() + options.timeout;
  std::unique_ptr<ShmCommunicator> comm(
      new ShmCommunicator(options.rank, options.world_size, options));
  const size_t control_bytes =
      (sizeof(Control) + sizeof(RankInfo) * options.world_size + kPage - 1) / kPage * kPage;
  comm->map_bytes_ =
      control_bytes + static_cast<size_t>(options.world_size + 1) * comm->chunk_bytes_;
  const std::string key = absl::StrCat(options.prefix, "/shm_name");
  int fd = -1;
  if (options.rank == 0) {
    comm->name_ = ShmSegmentName(options.prefix);
    ASSIGN_OR_RETURN(fd, CreateShmSegment(comm->name_, comm->map_bytes_));
  } else {
    ASSIGN_OR_RETURN(fd, OpenShmSegment(*options.store, key, options.rank, options.timeout,
                                         comm->map_bytes_, &comm->name_));
  }
  RETURN_IF_ERROR(comm->MapAndPublish(fd, options, control_bytes, key));
  comm->ranks_[options.rank].pid = static_cast<int32_t>(getpid());
  comm->ranks_[options.rank].pid_namespace = PidNamespace();
  // Every rank has mapped the segment once this passes; the name is no
  // longer needed, and unlinking it now means no leak if a rank crashes.
  absl::Status attached = comm->WaitAll(deadline, "connect");
  if (options.rank == 0) shm_unlink(comm->name_.c_str());
  if (!attached.ok()) return attached;
  comm->WatchLocalPeers();
  return comm;
}

absl::Status ShmCommunicator::MapAndPublish(int fd, const ShmOptions& options,
                                            size_t control_bytes, const std::string& key) {
  void* base = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  auto unlink_if_owner = [&] {
    if (options.rank == 0) shm_unlink(name_.c_str());
  };
  if (base == MAP_FAILED) {
    unlink_if_owner();
    return absl::ResourceExhaustedError(absl::StrCat("shm: rank ", options.rank,
                                                     " could not map ", name_, ": ",
                                                     Errno(map_errno)));
  }
  base_ = base;
  control_ = static_cast<Control*>(base);
  ranks_ = reinterpret_cast<RankInfo*>(static_cast<char*>(base) + sizeof(Control));
  data_ = static_cast<char*>(base) + control_bytes;
  if (options.rank != 0) {
    const Control& c = *control_;
    if (c.magic.load(std::memory_order_acquire) != kMagic ||
        c.world_size != options.world_size || c.chunk_bytes != chunk_bytes_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shm connect on rank ", options.rank, ": segment ", name_,
          " was made for another group (world_size or chunk_bytes differ)"));
    }
    return absl::OkStatus();
  }
  Control* fresh = new (base) Control;
  fresh->world_size = options.world_size;
  fresh->chunk_bytes = chunk_bytes_;
  fresh->arrived.store(0, std::memory_order_relaxed);
  fresh->generation.store(0, std::memory_order_relaxed);
  fresh->sleepers.store(0, std::memory_order_relaxed);
  fresh->aborted.store(0, std::memory_order_relaxed);
  fresh->reason_claimed.store(0, std::memory_order_relaxed);
  fresh->reason_ready.store(0, std::memory_order_relaxed);
  fresh->abort_reason[0] = '\0';
  fresh->magic.store(kMagic, std::memory_order_release);
  try {
    options.store->set(key, std::vector<char>(name_.begin(), name_.end()));
  } catch (const std::exception& e) {
    unlink_if_owner();
    return absl::UnavailableError(absl::StrCat("shm connect on rank 0: could not publish '", key,
                                               "': ", e.what()));
  }
  return absl::OkStatus();
}

void ShmCommunicator::WatchLocalPeers() {
  watch_.clear();
  const int32_t self = static_cast<int32_t>(getpid());
  for (int r = 0; r < world_size_; ++r) {
    const RankInfo& info = ranks_[r];
    if (info.pid != self && info.pid_namespace == ranks_[rank_].pid_namespace &&
        info.pid_namespace != 0) {
      watch_.push_back(r);
    }
  }
}

absl::Status ShmCommunicator::CheckUsable(absl::string_view op) const {
  if (!broken_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("shm ", op, " on rank ", rank_,
                                                    ": communicator unusable after an earlier "
                                                    "failure (", broken_reason_, ")"));
}

void ShmCommunicator::PublishReason(const std::string& reason) {
  uint32_t unclaimed = 0;
  if (control_->reason_claimed.compare_exchange_strong(unclaimed, 1)) {
    const size_t n = std::min(reason.size(), sizeof(control_->abort_reason) - 1);
    std::memcpy(control_->abort_reason, reason.data(), n);
    control_->abort_reason[n] = '\0';
    control_->reason_ready.store(1, std::memory_order_release);
  }
}

void ShmCommunicator::Abort(const std::string& reason) {
  // The first caller writes the reason, then publishes the flag; waiters
  // read the reason only after seeing the flag (acquire).
  bool expected = false;
  if (!abort_reason_claimed_.compare_exchange_strong(expected, true)) return;
  abort_reason_ = reason.empty() ? "aborted by the caller" : reason;
  abort_requested_.store(true, std::memory_order_release);
  if (control_ == nullptr || world_size_ == 1) return;
  // Fail the peers' waits too, with the reason, and wake every sleeper on
  // the barrier word.
  PublishReason(abort_reason_);
  uint32_t none = 0;
  control_->aborted.compare_exchange_strong(none, static_cast<uint32_t>(rank_ + 1));
  FutexWakeAll(&control_->generation);
}

absl::Status ShmCommunicator::WaitAll(absl::Time deadline, absl::string_view op) {
  if (world_size_ == 1) return absl::OkStatus();
  Control& c = *control_;
  auto fail = [&](absl::Status s) {
    broken_ = true;
    broken_reason_ = std::string(s.message());
    return s;
  };
  auto aborted_error = [&](uint32_t who) {
    if (c.reason_ready.load(std::memory_order_acquire) != 0) {
      return fail(absl::AbortedError(absl::StrCat("shm ", op, " on rank ", rank_,
                                                  " aborted by a peer: ", c.abort_reason)));
    }
    return fail(absl::AbortedError(absl::StrCat(
        "shm ", op, " on rank ", rank_, ": rank ", who - 1,
        " gave up waiting for the group (a peer died or stopped calling)")));
  };
  auto local_abort = [&] {
    return fail(absl::AbortedError(
        absl::StrCat("shm ", op, " on rank ", rank_, " aborted: ", abort_reason_)));
  };
  if (abort_requested_.load(std::memory_order_acquire)) return local_abort();
  if (uint32_t who = c.aborted.load(std::memory_order_acquire); who != 0) {
    return aborted_error(who);
  }
  const uint32_t gen = c.generation.load(std::memory_order_acquire);
  if (c.arrived.fetch_add(1, std::memory_order_acq_rel) == static_cast<uint32_t>(world_size_ - 1)) {
    c.arrived.store(0, std::memory_order_relaxed);
    c.generation.fetch_add(1, std::memory_order_seq_cst);
    if (c.sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&c.generation);
    return absl::OkStatus();
  }
  for (int i = 0; i < spin_iterations_; ++i) {
    if (c.generation.load(std::memory_order_acquire) != gen) return absl::OkStatus();
    CpuRelax();
  }
  const absl::Time start = absl::Now();
  while (true) {
    if (c.generation.load(std::memory_order_acquire) != gen) return absl::OkStatus();
    if (abort_requested_.load(std::memory_order_acquire)) return local_abort();
    if (uint32_t who = c.aborted.load(std::memory_order_acquire); who != 0) {
      return aborted_error(who);
    }
    const absl::Time now = absl::Now();
    // After a while, look for a peer process that has exited: a dead peer
    // then fails the group in ~0.1 s instead of after the whole timeout.
    if (now - start > kLivenessAfter) {
      for (int r : watch_) {
        if (!ProcessExited(ranks_[r].pid)) continue;
        // The peers' errors name the exited rank too (their workers report
        // it to the coordinator, whichever report arrives first).
        const std::string exited = PeerExitedText(r, ranks_[r].pid);
        PublishReason(exited);
        uint32_t expected = 0;
        c.aborted.compare_exchange_strong(expected, static_cast<uint32_t>(rank_ + 1));
        FutexWakeAll(&c.generation);
        return fail(absl::UnavailableError(absl::StrCat("shm ", op, " on rank ", rank_, ": ",
                                                        exited)));
      }
    }
    const absl::Duration left = deadline - now;
    if (left <= absl::ZeroDuration()) {
      // Mark the segment dead and wake everyone, so peers fail now rather
      // than each after its own timeout.
      uint32_t expected = 0;
      c.aborted.compare_exchange_strong(expected, static_cast<uint32_t>(rank_ + 1));
      FutexWakeAll(&c.generation);
      return fail(absl::DeadlineExceededError(absl::StrCat(
          "shm ", op, " on rank ", rank_, ": the other ranks did not arrive within ",
          absl::FormatDuration(timeout_), " (a peer died or stopped calling)")));
    }
    c.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (c.generation.load(std::memory_order_seq_cst) == gen) {
      FutexWait(&c.generation, gen, std::min(left, kWaitSlice));
    }
    c.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

// Shared-area discipline, which lets consecutive collectives run without an
// extra barrier between them: a collective's first write is to this rank's
// own slot; the result area is written only after a barrier; a phase that
// reads other ranks' slots is followed by a barrier before returning.

absl::Status ShmCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  return AllReduceChunks(data, count, op, nullptr);
}

absl::Status ShmCommunicator::AllReduceSumOfSquares(float* data, int64_t count, double* sum_sq) {
  *sum_sq = 0;
  if (world_size_ > 1) return AllReduceChunks(data, count, ReduceOp::kSum, sum_sq);
  if (absl::Status s = CheckUsable("allreduce"); !s.ok()) return s;
  numeric::SquareLanes squares;  // one rank: nothing to sum, one pass
  squares.Add(data, count);
  *sum_sq = squares.Sum();
  return absl::OkStatus();
}

absl::Status ShmCommunicator::AllReduceChunks(float* data, int64_t count, ReduceOp op,
                                              double* sum_sq) {
  if (absl::Status s = CheckUsable("allreduce"); !s.ok()) return s;
  if (count == 0 || world_size_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout_;
  const int64_t chunk = chunk_bytes_ / static_cast<int64_t>(sizeof(float));
  // Each rank reduces one share of a chunk, reading its own share straight
  // from `data` (so only the other shares are staged in its slot) and
  // writing the sum both to the result area and back into `data` (so only
  // the other shares are copied out). Per rank that moves 2(N-1)/N of the
  // chunk through the slots instead of 2, with the sum in rank order as
  // before: the result is the same bit for bit.
  for (int64_t off = 0; off < count; off += chunk) {
    const int64_t n = std::min(chunk, count - off);
    // This rank's share, rounded to 16 floats so shares never share a line.
    const int64_t share = ((n + world_size_ - 1) / world_size_ + 15) / 16 * 16;
    const int64_t lo = std::min(n, rank_ * share);
    const int64_t hi = std::min(n, lo + share);
    float* mine = reinterpret_cast<float*>(slot(rank_));
    if (lo > 0) std::memcpy(mine, data + off, lo * sizeof(float));
    if (n > hi) std::memcpy(mine + hi, data + off + hi, (n - hi) * sizeof(float));
    if (absl::Status s = WaitAll(deadline, "allreduce"); !s.ok()) return s;
    double part = 0;  // the sum of squares of this rank's share of the chunk
    double* const share_sum_sq = sum_sq != nullptr ? &part : nullptr;
    if (hi > lo) {
      for (int r = 0; r < world_size_; ++r) {
        srcs_[r] = r == rank_ ? data + off + lo : reinterpret_cast<const float*>(slot(r)) + lo;
      }
      float* dst = reinterpret_cast<float*>(result()) + lo;
      if (op == ReduceOp::kSum) {
        shm_internal::ReduceSlots<shm_internal::Sum>(dst, srcs_.data(), world_size_, hi - lo,
                                                     data + off + lo, share_sum_sq);
      } else {
        shm_internal::ReduceSlots<shm_internal::Max>(dst, srcs_.data(), world_size_, hi - lo, data + off + lo);
      }
    }
    if (sum_sq != nullptr) ranks_[rank_].share_sum_sq = *share_sum_sq;
    if (absl::Status s = WaitAll(deadline, "allreduce"); !s.ok()) return s;
    const float* res = reinterpret_cast<const float*>(result());
    if (lo > 0) std::memcpy(data + off, res, lo * sizeof(float));
    if (n > hi) std::memcpy(data + off + hi, res + hi, (n - hi) * sizeof(float));
    // Every rank adds the shares in rank order: the same value everywhere.
    if (sum_sq != nullptr) {
      for (int r = 0; r < world_size_; ++r) *sum_sq += ranks_[r].share_sum_sq;
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::ReduceScatter(const float* input, float* output,
                                            int64_t count_per_rank) {
  if (absl::Status s = CheckUsable("reduce-scatter"); !s.ok()) return s;
  if (count_per_rank == 0) return absl::OkStatus();
  if (world_size_ == 1) {
    std::memmove(output, input, count_per_rank * sizeof(float));
    return absl::OkStatus();
  }
  const absl::Time deadline = absl::Now() + timeout_;
  // Each slot holds world_size blocks of `block` floats: block j of a slot
  // is that rank's piece of rank j's slice.
  int64_t block = chunk_bytes_ / static_cast<int64_t>(sizeof(float)) / world_size_;
  if (block >= 16) block = block / 16 * 16;
  float* mine = reinterpret_cast<float*>(slot(rank_));
  for (int64_t off = 0; off < count_per_rank; off += block) {
    const int64_t n = std::min(block, count_per_rank - off);
    for (int j = 0; j < world_size_; ++j) {
      std::memcpy(mine + j * block, input + j * count_per_rank + off, n * sizeof(float));
    }
    if (absl::Status s = WaitAll(deadline, "reduce-scatter"); !s.ok()) return s;
    for (int r = 0; r < world_size_; ++r) {
      srcs_[r] = reinterpret_cast<const float*>(slot(r)) + rank_ * block;
    }
    shm_internal::ReduceSlots<shm_internal::Sum>(output + off, srcs_.data(), world_size_, n);
    if (absl::Status s = WaitAll(deadline, "reduce-scatter"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::AllGather(const void* input, void* output,
                                        int64_t bytes_per_rank) {
  if (absl::Status s = CheckUsable("allgather"); !s.ok()) return s;
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (world_size_ == 1) {
    std::memmove(output, input, bytes_per_rank);
    return absl::OkStatus();
  }
  const absl::Time deadline = absl::Now() + timeout_;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  for (int64_t off = 0; off < bytes_per_rank; off += chunk_bytes_) {
    const int64_t n = std::min(chunk_bytes_, bytes_per_rank - off);
    std::memcpy(slot(rank_), in + off, n);
    if (absl::Status s = WaitAll(deadline, "allgather"); !s.ok()) return s;
    for (int j = 0; j < world_size_; ++j) std::memcpy(out + j * bytes_per_rank + off, slot(j), n);
    if (absl::Status s = WaitAll(deadline, "allgather"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  if (absl::Status s = CheckUsable("broadcast"); !s.ok()) return s;
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("shm broadcast on rank ", rank_, ": root ",
                                                   root, " is not a rank"));
  }
  if (bytes == 0 || world_size_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout_;
  char* d = static_cast<char*>(data);
  for (int64_t off = 0; off < bytes; off += chunk_bytes_) {
    const int64_t n = std::min(chunk_bytes_, bytes - off);
    if (rank_ == root) std::memcpy(slot(root), d + off, n);
    if (absl::Status s = WaitAll(deadline, "broadcast"); !s.ok()) return s;
    if (rank_ != root) std::memcpy(d + off, slot(root), n);
    if (absl::Status s = WaitAll(deadline, "broadcast"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::AllToAll(const void* input, void* output,
                                       int64_t bytes_per_rank) {
  if (absl::Status s = CheckUsable("all-to-all"); !s.ok()) return s;
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (world_size_ == 1) {
    std::memmove(output, input, bytes_per_rank);
    return absl::OkStatus();
  }
  const absl::Time deadline = absl::Now() + timeout_;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  // Block j of a slot: this piece of what its owner sends to rank j.
  int64_t block = chunk_bytes_ / world_size_;
  if (block >= 64) block = block / 64 * 64;
  for (int64_t off = 0; off < bytes_per_rank; off += block) {
    const int64_t n = std::min(block, bytes_per_rank - off);
    for (int j = 0; j < world_size_; ++j) {
      std::memcpy(slot(rank_) + j * block, in + j * bytes_per_rank + off, n);
    }
    if (absl::Status s = WaitAll(deadline, "all-to-all"); !s.ok()) return s;
    for (int i = 0; i < world_size_; ++i) {
      std::memcpy(out + i * bytes_per_rank + off, slot(i) + rank_ * block, n);
    }
    if (absl::Status s = WaitAll(deadline, "all-to-all"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::Barrier() {
  if (absl::Status s = CheckUsable("barrier"); !s.ok()) return s;
  return WaitAll(absl::Now() + timeout_, "barrier");
}

}  // namespace tandem
