// PowerSgdSync: `--sync compressed --sync_opt codec=powersgd,rank=R`, low-rank
// gradient compression that stays allreduce-compatible (Vogels et al.,
// NeurIPS'19; PyTorch's powerSGD_hook). Buckets overlap backward as in
// `allreduce` (the BucketEngine); per bucket, every weight of the bucket
// that compresses (PowerSgdCompresses: elements >= min_compression x
// (rows + cols) x R; 1-D tensors never do; nor embedding tables unless
// compress_embeddings: IsEmbeddingName) is a matrix M = its gradient plus
// its error-feedback residual, and
//
//   Pt = Qt M^T for each M; one ring allreduce (sum) of every P of the
//     bucket together with the bucket's other values (uncompressed fp32);
//   orthonormalize each P (Gram-Schmidt); Qt = Pt M; one ring allreduce of
//     the bucket's Qs;
//   gradient = P Q^T (the approximation of the sum over ranks: P is the
//     same on every rank, Q the sum of M_r^T P); residual = M - P Q^T / W.
//
// Q is kept across steps (warm start: the next step's power iteration
// starts from it), initialised from FillStandardNormal with a fixed seed,
// the same on every rank. The first warmup_steps steps every bucket is one
// fp32 allreduce, exactly `allreduce` (Q and the residuals untouched). A
// step skipped for non-finite gradients resets the residuals and Q to
// their initial values on every rank. Then average, clip and the
// optimizer on every rank, as `allreduce`.
//
// State (extra_state(), checkpointed by name): "powersgd/meta" (the layout
// and steps done), "powersgd/q" (rank 0's Q, the same on every rank) and
// "powersgd/residuals" (every rank's, gathered onto rank 0 by
// SyncStateToHost and sent back by StateLoaded, collective calls as in
// compressed_sync.h). At another world size the residuals reset to zero
// (Q is kept when the matrices and rank are the same), with a log line on
// rank 0. Nothing is allocated per step; host memory only.
//
// Thread-safety and ownership: as AllreduceSync (allreduce_sync.h).
// Failure: CreatePowerSgdSync returns InvalidArgument naming the option for
// rank < 1, a rank no weight of the model can be compressed at (larger
// than every matrix allows), no parameter shapes, min_compression < 1,
// warmup_steps < 0 and device memory; collectives fail as in allreduce.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

struct PowerSgdSyncOptions {
  Communicator* comm = nullptr;  // borrowed; host buffers (Gloo, shm)
  float* params = nullptr;       // flat parameters [0, size)
  float* grads = nullptr;        // flat gradients, same layout
  int64_t size = 0;
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  // Every parameter's offset and shape (SyncEnv::param_shapes), required.
  std::vector<ParamShape> param_shapes;
  double bucket_cap_mb = 25;
  std::unique_ptr<optim::Optimizer> optimizer;  // over [0, size)
  double max_grad_norm = 0;
  // Optional: refused if it builds a device stepper (host only).
  optim::DeviceStepperFactory make_device_stepper;
  // Borrowed, optional: for stats().inter_node_bytes (world must be comm).
  const CommGroups* groups = nullptr;

  int rank = 4;                  // R, >= 1
  int64_t warmup_steps = 10;     // first steps plain fp32 allreduce
  double min_compression = 2;    // >= 1; see above
  // Embedding tables (IsEmbeddingName) as matrices too. Off by default:
  // a step's gradient touches only the rows of the tokens it saw, a
  // row-sparse matrix that rank R approximates badly (the GPT's eval loss,
  // docs/benchmarks.md); they then travel uncompressed with the bucket.
  bool compress_embeddings = false;
  bool error_feedback = true;
  uint64_t seed = 0x504f5745525347ull;  // Q's initialisation ("POWERSG")
};

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePowerSgdSync(PowerSgdSyncOptions options);

// Whether a parameter name is an embedding table's: a dot-separated part
// that contains "embed" ("embed.token", "tok_embeddings.weight") or is
// "wte" / "wpe" (GPT-2's names). Case-insensitive.
bool IsEmbeddingName(const std::string& name);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_H_
