// Test-only: the collective checks every Communicator implementation must
// pass, written once and run by each implementation's test (Gloo, shm) from
// one thread per rank (see rank_threads.h). Each function is called on
// every rank with the same `count` and returns a Status naming the first
// wrong element. Values are small integers, so fp32 sums are exact.
#ifndef TANDEM_COMMON_COMM_TESTING_CONFORMANCE_H_
#define TANDEM_COMMON_COMM_TESTING_CONFORMANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/comm/testing/rank_threads.h"

namespace tandem {
namespace comm_testing {

// AllReduce(sum) of `count` floats, `rounds` times on the same communicator.
absl::Status CheckAllReduceSum(Communicator& c, int64_t count, int rounds = 1);
// AllReduce(max) where the largest value sits on a different rank per element.
absl::Status CheckAllReduceMax(Communicator& c, int64_t count);
// ReduceScatter of world*count floats (each rank's slice checked), then
// AllGather of the slices (the whole sum checked).
absl::Status CheckReduceScatterAllGather(Communicator& c, int64_t count);
// Broadcast of `count` int32 from the last rank, AllToAll of count int32 per
// rank pair, then a Barrier.
absl::Status CheckBroadcastAllToAllBarrier(Communicator& c, int64_t count);

// Abort of a collective stuck on a hung peer: every rank of `world` (>= 2)
// passes a barrier; then ranks 0..world-2 start an AllReduce that the last
// rank never joins (it stays alive, its communicator open, like a stopped
// process). Once they are inside, the last rank calls Abort(reason) on each
// of their communicators from its own thread. Returns, for ranks
// 0..world-2, the AllReduce's status, or an error if a later Barrier on the
// aborted instance succeeded; the last rank's entry is OK. With a
// collective timeout far beyond the test's own, an Abort that does not wake
// the waiters shows as a test timeout.
std::vector<absl::Status> RunAbortOfHungCollective(int world, const MakeCommunicator& make,
                                                   const std::string& reason);

}  // namespace comm_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_TESTING_CONFORMANCE_H_
