// One StreamBatches call's producer: packs this rank's slices of
// consecutive global batches ahead of the consumer, on a shared thread pool,
// into a fixed ring of `prefetch_depth` reusable Batch messages.
//
//   ASSIGN_OR_RETURN(auto stream, BatchStream::Create(dataset, request,
//                                                     &pool, options));
//   for (;;) {
//     absl::StatusOr<const v1::Batch*> b = stream->Next();
//     if (absl::IsOutOfRange(b.status())) break;  // max_batches sent
//     RETURN_IF_ERROR(b.status());
//     Send(**b);
//     stream->Release();
//   }
//
// Memory is bounded by prefetch_depth batches whatever the consumer does:
// a slot is repacked only after Release. The sample order is the sampler's
// (common/data/sampler.h); batch k carries (epoch, step_in_epoch,
// start_position) so a client resumes with the cursor after the last batch
// it received, and end_position, the samples of the epoch consumed after
// it, so a generation of another world or batch size resumes there (the
// request's start_position).
//
// Next/Release are called from one thread (the gRPC handler); pack tasks run
// on the pool. The dataset, pool and metrics must outlive the stream; the
// destructor waits for its in-flight pack tasks. Create fails with
// INVALID_ARGUMENT (rank >= world, batch size 0, cursor past the epoch,
// normalize on non-u8 features); Next returns a dataset read error (DATA_LOSS
// naming file and offset) for the batch that hit it.
#ifndef TANDEM_SERVICES_DATASERVER_BATCH_STREAM_H_
#define TANDEM_SERVICES_DATASERVER_BATCH_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data/sampler.h"
#include "proto/dataserver.pb.h"
#include "common/data/dataset.h"
#include "services/dataserver/server_metrics.h"
#include "services/dataserver/thread_pool.h"

namespace tandem {
namespace dataserver {

struct BatchStreamOptions {
  int prefetch_depth = 4;                // batches packed ahead, >= 1
  const ServerMetrics* metrics = nullptr;  // optional
  // Simulated slow storage: packing a batch takes at least this long (the
  // decode thread waits out the rest). Fault injection for data-bound
  // tests and demos; zero = off.
  absl::Duration read_delay = absl::ZeroDuration();
};

// The sampler configuration a request describes (dataset size from `ds`).
data::SamplerConfig SamplerConfigFor(const data::Dataset& ds,
                                     const v1::StreamBatchesRequest& request);

class BatchStream {
 public:
  static absl::StatusOr<std::unique_ptr<BatchStream>> Create(
      const data::Dataset* dataset, const v1::StreamBatchesRequest& request,
      ThreadPool* pool, BatchStreamOptions options);

  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  // Blocks until the next batch is packed; valid until Release().
  // OUT_OF_RANGE once max_batches batches were returned.
  absl::StatusOr<const v1::Batch*> Next();
  // Hands the batch from the last Next() back for reuse.
  void Release();

 private:
  enum class SlotState { kFree, kPacking, kReady };
  struct Slot {
    SlotState state = SlotState::kFree;
    absl::Status status;
    v1::Batch batch;
    std::vector<uint8_t> scratch;  // one sample's u8 features (normalize)
  };

  BatchStream(const data::Dataset* dataset, const v1::StreamBatchesRequest& request,
              ThreadPool* pool, BatchStreamOptions options);
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Pack(int slot_index);

  const data::Dataset* const dataset_;
  ThreadPool* const pool_;
  const BatchStreamOptions options_;
  const data::SamplerConfig config_;
  const int rank_;
  const int64_t max_batches_;
  const bool normalize_;
  const int64_t feature_elems_;  // elements per sample
  const int64_t label_bytes_;
  std::atomic<bool> cancelled_{false};

  absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);  // size fixed at creation
  data::Cursor next_cursor_ ABSL_GUARDED_BY(mu_);  // of the next scheduled
  data::EpochOrder order_ ABSL_GUARDED_BY(mu_);
  int64_t scheduled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t returned_ ABSL_GUARDED_BY(mu_) = 0;  // batches released
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dataserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_DATASERVER_BATCH_STREAM_H_
