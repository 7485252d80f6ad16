// Which rank a Gloo TCP error is about. Gloo names a broken pair by its
// peer's address ("Connection closed by peer [127.0.0.1]:41234$3", "Read
// error [...]: Connection reset by peer"), not by rank. connectFullMesh
// reads every peer's addresses from the rendezvous store; RecordingStore
// keeps what it read, PeerAddresses turns that into one address string per
// rank, and PeerNamedIn finds the rank whose address (or host) an error
// names.
//
//   RecordingStore recording(&store);
//   context->connectFullMesh(recording, device);
//   std::vector<std::string> peers = PeerAddresses(recording, rank, world);
//   ...  int r = PeerNamedIn(peers, e.what());   // or -1
//
// RecordingStore is as thread-safe as the store it wraps (connectFullMesh
// uses it from one thread); it borrows that store. The functions are pure.
#ifndef TANDEM_COMMON_COMM_GLOO_PEER_ADDRESSES_H_
#define TANDEM_COMMON_COMM_GLOO_PEER_ADDRESSES_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gloo/rendezvous/store.h"

namespace tandem {

class RecordingStore final : public gloo::rendezvous::Store {
 public:
  explicit RecordingStore(gloo::rendezvous::Store* inner) : inner_(inner) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<char> value = inner_->get(key);
    got_[key] = value;
    return value;
  }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    inner_->wait(keys, timeout);
  }

  // Every value get() returned, by key.
  const std::map<std::string, std::vector<char>>& got() const { return got_; }

 private:
  gloo::rendezvous::Store* inner_;
  std::map<std::string, std::vector<char>> got_;
};

// For each rank r, the address (Gloo's tcp::Address::str()) that rank r
// gave for its pair with `rank`, as connectFullMesh read it under key "r";
// "" for `rank` itself and for anything not read or malformed.
std::vector<std::string> PeerAddresses(const RecordingStore& store, int rank, int world_size);

// The one rank whose address appears in `message`; else the one rank whose
// host ("[ip]:") does (the accepting side of a pair prints the peer's
// ephemeral port); else -1 (none, or more than one: ranks on one host of
// a world over 2 are named only when the connecting side failed).
int PeerNamedIn(const std::vector<std::string>& addresses, absl::string_view message);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_GLOO_PEER_ADDRESSES_H_
