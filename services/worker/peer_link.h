// PeerLink: a one-way byte channel from each rank to its ring neighbour
// (rank r -> r + 1 mod W) over a plain TCP side connection, for the peer
// replicas of sharded state (peer_replica.h, issue 34 item 1).
//
//   ASSIGN_OR_RETURN(auto link, PeerLink::Start(*g.ctl, options, &sink));
//   link->Send(frame_header, payload, bytes);   // returns at once
//   ...
//   RETURN_IF_ERROR(link->WaitSent());          // before reusing `payload`
//
// Why a side connection and not the generation's Gloo / shm mesh: those
// are collective-only (every rank in the same call in the same order), so
// a send in the background would have to be matched by a receive at the
// same point on the trainer thread of the neighbour, and a dead neighbour
// would block the collective it shares with the gradient path. A socket of
// our own moves the bytes on two background threads (one sending, one
// receiving), never touches the step's communicators, and a lost peer only
// fails that transfer. Addresses travel once per generation in one small
// all-gather over the control mesh (Start is collective).
//
// Frames: a fixed header (the caller's 64 bytes), then `bytes` of payload,
// then the receiver's 8-byte acknowledgement (the payload's CRC32C): a
// send counts as done only when the neighbour has the whole frame.
//
// Thread-safety: Send / WaitSent from one thread (the trainer's); the sink
// is called on the receive thread. Owns its sockets and threads; the
// destructor shuts the sockets down and joins (never blocks on a peer).
// Failure: Start returns the listener's or the all-gather's error;
// WaitSent returns the last send's error (UNAVAILABLE: the neighbour is
// gone or did not answer within `timeout`) — a lost replica, not a reason
// to stop training.
#ifndef TANDEM_SERVICES_WORKER_PEER_LINK_H_
#define TANDEM_SERVICES_WORKER_PEER_LINK_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/comm/communicator.h"

namespace tandem {
namespace worker {

constexpr size_t kPeerFrameHeaderBytes = 64;
using PeerFrameHeader = std::array<char, kPeerFrameHeaderBytes>;

// Where received frames go (called on the receive thread, one frame at a
// time). Begin returns a buffer of `bytes` to fill, or null to refuse the
// frame (it is then read and dropped); Complete says whether it arrived
// whole (length and CRC32C checked).
class PeerSink {
 public:
  virtual ~PeerSink() = default;
  virtual char* Begin(const PeerFrameHeader& header, uint64_t bytes) = 0;
  virtual void Complete(bool ok) = 0;
};

struct PeerLinkOptions {
  std::string hostname = "127.0.0.1";  // this rank's address for its peers
  absl::Duration timeout = absl::Seconds(60);  // one send, connect to ack
};

class PeerLink {
 public:
  // Collective over `ctl`: listens on a free port, all-gathers every
  // rank's address, starts the receive thread. `sink` must outlive the link.
  static absl::StatusOr<std::unique_ptr<PeerLink>> Start(Communicator& ctl,
                                                         const PeerLinkOptions& options,
                                                         PeerSink* sink);
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // Starts sending one frame to the next rank; `payload` must stay valid
  // and unchanged until WaitSent returns. The previous send must be done.
  void Send(const PeerFrameHeader& header, const char* payload, uint64_t bytes);
  // Waits for the frame in flight (if any) and returns its outcome.
  absl::Status WaitSent();
  // Never blocks: false while a frame is in flight; else true with the
  // last frame's outcome in *status.
  bool Done(absl::Status* status);

 private:
  PeerLink(const PeerLinkOptions& options, PeerSink* sink, int listen_fd)
      : o_(options), sink_(sink), listen_fd_(listen_fd) {}
  void SendLoop();
  void ReceiveLoop();
  absl::Status SendFrame();
  absl::Status Connect();

  const PeerLinkOptions o_;
  PeerSink* const sink_;
  const int listen_fd_;
  std::string next_host_;
  int next_port_ = 0;
  int next_label_ = 0;  // the next rank, for messages

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;  // a frame handed to the send thread
  absl::Status sent_ ABSL_GUARDED_BY(mu_);
  PeerFrameHeader header_ ABSL_GUARDED_BY(mu_) = {};
  const char* payload_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int send_fd_ ABSL_GUARDED_BY(mu_) = -1;  // connected to the next rank, or -1
  int recv_fd_ ABSL_GUARDED_BY(mu_) = -1;  // accepted from the previous rank, or -1
  std::thread sender_, receiver_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_PEER_LINK_H_
