// CoordinatorStore: Gloo's rendezvous::Store over the coordinator's
// generation-scoped key-value store (tandem.v1.Coordinator KvSet / KvGet), so
// a Gloo mesh bootstraps through the coordinator with no shared filesystem.
//
//   CoordinatorStoreOptions o;
//   o.channel = MakeChannel({.target = "127.0.0.1:7000"});
//   o.job_id = "j1";  o.generation = join.generation();
//   ASSIGN_OR_RETURN(auto store, CoordinatorStore::Create(o));
//   GlooOptions g{.rank = join.rank(), .world_size = join.world_size(),
//                 .store = store.get(), .prefix = absl::StrCat("gen", gen)};
//   ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(g));
//
// Keys live only as long as the generation: the coordinator drops them when
// a new generation forms, and refuses calls for an old one.
//
// Failure: Gloo's Store interface has no status, and Gloo expects a store to
// throw; so every method throws gloo::IoException with a message naming the
// operation, the key and the coordinator's error (a timeout says "Timed
// out", which GlooCommunicator maps to DEADLINE_EXCEEDED). Only Gloo calls
// these methods, and GlooCommunicator catches at its boundary: nothing else
// in tandem sees the exception.
//
// Thread-safe (each call is an independent RPC). The channel is shared.
#ifndef TANDEM_COMMON_COMM_COORDINATOR_STORE_H_
#define TANDEM_COMMON_COMM_COORDINATOR_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "grpcpp/channel.h"
#include "proto/coordinator.grpc.pb.h"

namespace tandem {

struct CoordinatorStoreOptions {
  // Channel to the coordinator (required; shared with the worker's client).
  std::shared_ptr<grpc::Channel> channel;
  std::string job_id = "tandem";
  // The generation whose key space this store reads and writes (required,
  // >= 1: generations are numbered from 1).
  int64_t generation = 0;
  // Deadline of one KvSet attempt; UNAVAILABLE is retried a few times.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // How long get() and the timeout-less wait() wait for a key.
  absl::Duration default_wait = absl::Seconds(60);
};

class CoordinatorStore final : public gloo::rendezvous::Store {
 public:
  // INVALID_ARGUMENT for a missing channel or a generation < 1.
  static absl::StatusOr<std::unique_ptr<CoordinatorStore>> Create(
      const CoordinatorStoreOptions& options);

  CoordinatorStore(const CoordinatorStore&) = delete;
  CoordinatorStore& operator=(const CoordinatorStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits up to default_wait for the key, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  int64_t generation() const { return options_.generation; }

 private:
  explicit CoordinatorStore(const CoordinatorStoreOptions& options);
  // KvGet of `keys`, waiting up to `timeout`; throws on failure.
  std::vector<std::string> Get(const std::vector<std::string>& keys, absl::Duration timeout,
                               const char* what);

  const CoordinatorStoreOptions options_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_COORDINATOR_STORE_H_
