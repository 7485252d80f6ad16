#include "common/comm/testing/conformance.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/comm/testing/rank_threads.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace comm_testing {
namespace {

// The exact sum over ranks of ExactValue(rank, i).
float ExpectedSum(int world, int64_t i) { return world * (world + 1) / 2.0f * ((i % 7) + 1); }

}  // namespace

absl::Status CheckAllReduceSum(Communicator& c, int64_t count, int rounds) {
  const int rank = c.rank(), world = c.world_size();
  std::vector<float> data(count);
  for (int round = 0; round < rounds; ++round) {
    for (int64_t i = 0; i < count; ++i) data[i] = ExactValue(rank, i);
    RETURN_IF_ERROR(c.AllReduce(data.data(), count));
    for (int64_t i = 0; i < count; ++i) {
      if (data[i] != ExpectedSum(world, i)) {
        return absl::InternalError(absl::StrCat("allreduce sum: rank ", rank, " round ", round,
                                                " element ", i, " = ", data[i]));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAllReduceMax(Communicator& c, int64_t count) {
  const int rank = c.rank(), world = c.world_size();
  std::vector<float> data(count);
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + i) % world) - 2.5f;
  RETURN_IF_ERROR(c.AllReduce(data.data(), count, ReduceOp::kMax));
  for (int64_t i = 0; i < count; ++i) {
    if (data[i] != world - 3.5f) {
      return absl::InternalError(absl::StrCat("allreduce max: rank ", rank, " element ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReduceScatterAllGather(Communicator& c, int64_t count) {
  const int rank = c.rank(), world = c.world_size();
  std::vector<float> in(count * world), slice(count), gathered(count * world);
  for (int64_t i = 0; i < count * world; ++i) in[i] = ExactValue(rank, i);
  RETURN_IF_ERROR(c.ReduceScatter(in.data(), slice.data(), count));
  for (int64_t i = 0; i < count; ++i) {
    if (slice[i] != ExpectedSum(world, rank * count + i)) {
      return absl::InternalError(absl::StrCat("reduce-scatter: rank ", rank, " element ", i));
    }
  }
  RETURN_IF_ERROR(c.AllGather(slice.data(), gathered.data(), count * sizeof(float)));
  for (int64_t i = 0; i < count * world; ++i) {
    if (gathered[i] != ExpectedSum(world, i)) {
      return absl::InternalError(absl::StrCat("allgather: rank ", rank, " element ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBroadcastAllToAllBarrier(Communicator& c, int64_t count) {
  const int rank = c.rank(), world = c.world_size();
  const int root = world - 1;
  std::vector<int32_t> b(count);
  for (int64_t i = 0; i < count; ++i) b[i] = rank * 1000 + static_cast<int32_t>(i % 1000);
  RETURN_IF_ERROR(c.Broadcast(b.data(), count * sizeof(int32_t), root));
  for (int64_t i = 0; i < count; ++i) {
    if (b[i] != root * 1000 + i % 1000) {
      return absl::InternalError(absl::StrCat("broadcast: rank ", rank, " element ", i));
    }
  }
  // Block j of rank r's input goes to rank j: the value encodes (r, j, i).
  std::vector<int32_t> in(count * world), out(count * world);
  for (int j = 0; j < world; ++j) {
    for (int64_t i = 0; i < count; ++i) in[j * count + i] = (rank * 16 + j) * 4096 + i % 4096;
  }
  RETURN_IF_ERROR(c.AllToAll(in.data(), out.data(), count * sizeof(int32_t)));
  for (int src = 0; src < world; ++src) {
    for (int64_t i = 0; i < count; ++i) {
      if (out[src * count + i] != (src * 16 + rank) * 4096 + i % 4096) {
        return absl::InternalError(
            absl::StrCat("all-to-all: rank ", rank, " from ", src, " element ", i));
      }
    }
  }
  return c.Barrier();
}

std::vector<absl::Status> RunAbortOfHungCollective(int world, const MakeCommunicator& make,
                                                   const std::string& reason) {
  absl::Mutex mu;
  std::vector<Communicator*> comms(world, nullptr);
  int inside = 0;  // waiting ranks about to enter (or inside) the AllReduce
  int done = 0;    // waiting ranks that returned
  const int hung = world - 1;
  return RunRanks(world, make, [&](int rank, Communicator& c) -> absl::Status {
    RETURN_IF_ERROR(c.Barrier());
    if (rank == hung) {
      auto all_inside = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return inside == hung; };
      auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == hung; };
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&all_inside));
      for (int r = 0; r < hung; ++r) comms[r]->Abort(reason);
      // Stay alive with the communicator open (a stopped process), so the
      // others cannot fail for a closed connection instead.
      mu.Await(absl::Condition(&all_done));
      return absl::OkStatus();
    }
    std::vector<float> data(1 << 16, 1.0f);
    {
      absl::MutexLock lock(&mu);
      comms[rank] = &c;
      ++inside;
    }
    absl::Status s = c.AllReduce(data.data(), static_cast<int64_t>(data.size()));
    if (!s.ok() && c.Barrier().ok()) {
      s = absl::InternalError(absl::StrCat("rank ", rank, ": Barrier succeeded after Abort"));
    }
    absl::MutexLock lock(&mu);
    ++done;
    return s;
  });
}

}  // namespace comm_testing
}  // namespace tandem
