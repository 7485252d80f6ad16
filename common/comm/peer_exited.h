// How a transport says "the process of peer rank R has exited", and how the
// worker reads it back: a survivor that saw a peer's process gone (the shm
// transport checks the peer's pid) reports that rank to the coordinator as
// exited, and the coordinator stops waiting for it at once instead of after
// its missed heartbeats (services/coordinator/coordinator_core.h).
//
//   return absl::UnavailableError(absl::StrCat("shm allreduce on rank 0: ",
//                                              PeerExitedText(2, pid)));
//   ...
//   int lost = ExitedPeerRank(status.message());   // 2, or -1
//
// The text is the contract: it survives the layers that re-wrap a status
// with more context (a payload would not). Only evidence that the process
// is gone may use it; a timeout or a reset connection is not.
// Stateless and thread-safe.
#ifndef TANDEM_COMMON_COMM_PEER_EXITED_H_
#define TANDEM_COMMON_COMM_PEER_EXITED_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tandem {

// "rank R (pid P) exited".
std::string PeerExitedText(int rank, int pid);

// The rank named by the first PeerExitedText in `message`, or -1.
int ExitedPeerRank(absl::string_view message);

// "the connection to rank R broke": a transport lost its link to rank R (a
// reset or closed TCP connection). No proof that R's process is gone (a
// slow peer's connection can break too): the worker reports R as accused
// only, and the coordinator confirms or not (coordinator_core.h).
std::string PeerConnectionBrokeText(int rank);

// The rank named by the first PeerConnectionBrokeText in `message`, or -1.
int BrokenPeerRank(absl::string_view message);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_PEER_EXITED_H_
