#include "common/comm/gloo/peer_addresses.h"

#include <cctype>
#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/transport/tcp/address.h"

namespace tandem {

std::vector<std::string> PeerAddresses(const RecordingStore& store, int rank, int world_size) {
  std::vector<std::string> out(world_size > 0 ? world_size : 0);
  if (world_size < 2) return out;
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    auto it = store.got().find(absl::StrCat(r));
    if (it == store.got().end()) continue;
    // Rank r stored one address per peer but itself, in rank order
    // (gloo::rendezvous::Context::connectFullMesh).
    const std::vector<char>& all = it->second;
    const size_t size = all.size() / (world_size - 1);
    const size_t slot = rank > r ? rank - 1 : rank;
    if (size == 0 || all.size() % (world_size - 1) != 0) continue;
    try {
      out[r] = gloo::transport::tcp::Address(
                   std::vector<char>(all.begin() + slot * size, all.begin() + (slot + 1) * size))
                   .str();
    } catch (const std::exception&) {
      // Not an address of this Gloo's format: this rank stays unnamed.
    }
  }
  return out;
}

namespace {

// The rank whose `part(address)` occurs in `message` (a whole port: not
// followed by a digit, unless `part` ends before the port); -1 when none
// or several do.
template <typename Part>
int UniqueMatch(const std::vector<std::string>& addresses, absl::string_view message, Part part) {
  int found = -1;
  for (int r = 0; r < static_cast<int>(addresses.size()); ++r) {
    const absl::string_view needle = part(addresses[r]);
    if (needle.empty()) continue;
    for (size_t at = message.find(needle); at != absl::string_view::npos;
         at = message.find(needle, at + 1)) {
      const size_t end = at + needle.size();
      if (needle.back() != ':' && end < message.size() &&
          std::isdigit(static_cast<unsigned char>(message[end]))) {
        continue;
      }
      if (found >= 0 && found != r) return -1;
      found = r;
      break;
    }
  }
  return found;
}

}  // namespace

int PeerNamedIn(const std::vector<std::string>& addresses, absl::string_view message) {
  const int exact = UniqueMatch(addresses, message, [](const std::string& a) {
    return absl::string_view(a);
  });
  if (exact >= 0) return exact;
  // The side that accepted a pair's connection knows the peer by its
  // ephemeral source port, not the address it published: the host alone
  // ("[10.0.0.7]:") then names the rank when no other peer shares it.
  return UniqueMatch(addresses, message, [](const std::string& a) {
    const size_t colon = a.rfind("]:");
    return colon == std::string::npos ? absl::string_view() : absl::string_view(a).substr(0, colon + 2);
  });
}

}  // namespace tandem
