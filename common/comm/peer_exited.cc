#include "common/comm/peer_exited.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// Reads the digits at the front of `s` into *value; false if none.
bool TakeInt(absl::string_view* s, int* value) {
  size_t n = 0;
  while (n < s->size() && std::isdigit(static_cast<unsigned char>((*s)[n]))) ++n;
  if (n == 0 || !absl::SimpleAtoi(s->substr(0, n), value)) return false;
  s->remove_prefix(n);
  return true;
}

bool Take(absl::string_view* s, absl::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string PeerExitedText(int rank, int pid) {
  return absl::StrCat("rank ", rank, " (pid ", pid, ") exited");
}

int ExitedPeerRank(absl::string_view message) {
  for (size_t at = message.find("rank "); at != absl::string_view::npos;
       at = message.find("rank ", at + 1)) {
    absl::string_view s = message.substr(at + 5);
    int rank = -1;
    int pid = -1;
    if (TakeInt(&s, &rank) && Take(&s, " (pid ") && TakeInt(&s, &pid) && Take(&s, ") exited")) {
      return rank;
    }
  }
  return -1;
}

std::string PeerConnectionBrokeText(int rank) {
  return absl::StrCat("the connection to rank ", rank, " broke");
}

int BrokenPeerRank(absl::string_view message) {
  constexpr absl::string_view kLead = "the connection to rank ";
  for (size_t at = message.find(kLead); at != absl::string_view::npos;
       at = message.find(kLead, at + 1)) {
    absl::string_view s = message.substr(at + kLead.size());
    int rank = -1;
    if (TakeInt(&s, &rank) && Take(&s, " broke")) return rank;
  }
  return -1;
}

}  // namespace tandem
