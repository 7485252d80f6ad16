// Test-only: RunRanks (rank_threads.h) with a Gloo communicator per rank,
// the setup most multi-rank tests of common/ want; and BorrowedCommunicator,
// for handing a rank's communicator to code that wants to own one (the
// strategy registry's CommGroups) while RunRanks keeps it.
//
//   auto results = comm_testing::RunGlooRanks(3, [&](int rank, Communicator& c) {
//     return c.Barrier();
//   });
#ifndef TANDEM_COMMON_COMM_TESTING_GLOO_RANKS_H_
#define TANDEM_COMMON_COMM_TESTING_GLOO_RANKS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/comm/communicator.h"
#include "common/comm/testing/rank_threads.h"

namespace tandem {
namespace comm_testing {

// One thread per rank, each with a GlooCommunicator (collective timeout
// `timeout`) over one in-memory store; each rank's status.
std::vector<absl::Status> RunGlooRanks(int world, absl::Duration timeout, const RankBody& body);
// With a 60 s timeout.
inline std::vector<absl::Status> RunGlooRanks(int world, const RankBody& body) {
  return RunGlooRanks(world, absl::Seconds(60), body);
}

// Forwards every call to a communicator it does not own (a test may derive
// from it to observe or change a few calls).
class BorrowedCommunicator : public Communicator {
 public:
  explicit BorrowedCommunicator(Communicator* c) : c_(c) {}
  int rank() const override { return c_->rank(); }
  int world_size() const override { return c_->world_size(); }
  std::string backend() const override { return c_->backend(); }
  absl::Status AllReduce(float* d, int64_t n, ReduceOp op) override {
    return c_->AllReduce(d, n, op);
  }
  bool fuses_sum_of_squares() const override { return c_->fuses_sum_of_squares(); }
  absl::Status AllReduceSumOfSquares(float* d, int64_t n, double* sum_sq) override {
    return c_->AllReduceSumOfSquares(d, n, sum_sq);
  }
  absl::Status ReduceScatter(const float* in, float* out, int64_t n) override {
    return c_->ReduceScatter(in, out, n);
  }
  absl::Status AllGather(const void* in, void* out, int64_t b) override {
    return c_->AllGather(in, out, b);
  }
  absl::Status Broadcast(void* d, int64_t b, int root) override {
    return c_->Broadcast(d, b, root);
  }
  absl::Status AllToAll(const void* in, void* out, int64_t b) override {
    return c_->AllToAll(in, out, b);
  }
  absl::Status Barrier() override { return c_->Barrier(); }

 private:
  Communicator* c_;
};

}  // namespace comm_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_TESTING_GLOO_RANKS_H_
