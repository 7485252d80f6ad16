#include "services/dataserver/batch_stream.h"


#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/unit_scale.h"
#include "common/status/status_macros.h"
#include "common/trace/trace.h"

namespace tandem {
namespace dataserver {

data::SamplerConfig SamplerConfigFor(const data::Dataset& ds,
                                     const v1::StreamBatchesRequest& r) {
  data::SamplerConfig c;
  c.num_samples = ds.num_samples();
  c.seed = r.seed();
  c.global_batch_size = r.global_batch_size();
  c.world_size = r.world_size();
  c.remainder = r.remainder() == v1::SHORT_LAST ? data::Remainder::kShortLast
                                                : data::Remainder::kDrop;
  c.shuffle = r.shuffle();
  return c;
}

absl::StatusOr<std::unique_ptr<BatchStream>> BatchStream::Create(
    const data::Dataset* dataset, const v1::StreamBatchesRequest& request,
    ThreadPool* pool, BatchStreamOptions options) {
  const data::SamplerConfig config = SamplerConfigFor(*dataset, request);
  const std::string what = absl::StrCat("StreamBatches(", request.dataset(), "): ");
  absl::Status s = data::ValidateSamplerConfig(config, request.rank());
  if (s.ok()) {
    s = data::ValidateCursor(
        config, {request.epoch(), request.step_in_epoch(), request.start_position()});
  }
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(what, s.message()));
  if (request.max_batches() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "max_batches must be >= 0 (0 = unlimited)"));
  }
  if (request.normalize_to_f32() &&
      dataset->info().feature_spec().dtype() != v1::DTYPE_U8) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "normalize_to_f32 needs u8 features; this dataset's are ",
        v1::DType_Name(dataset->info().feature_spec().dtype())));
  }
  if (options.prefetch_depth < 1) options.prefetch_depth = 1;
  std::unique_ptr<BatchStream> stream(
      new BatchStream(dataset, request, pool, options));
  absl::MutexLock lock(&stream->mu_);
  stream->ScheduleLocked();
  return stream;
}

BatchStream::BatchStream(const data::Dataset* dataset,
                         const v1::StreamBatchesRequest& request,
                         ThreadPool* pool, BatchStreamOptions options)
    : dataset_(dataset),
      pool_(pool),
      options_(options),
      config_(SamplerConfigFor(*dataset, request)),
      rank_(request.rank()),
      max_batches_(request.max_batches()),
      normalize_(request.normalize_to_f32()),
      feature_elems_(dataset->feature_bytes() /
                     data::DTypeSize(dataset->info().feature_spec().dtype())),
      label_bytes_(dataset->label_bytes()),
      slots_(options.prefetch_depth),
      next_cursor_{request.epoch(), request.step_in_epoch(), request.start_position()} {
  // Buffers are sized once for the largest slice; packing only reuses them.
  const int64_t max_local = data::MaxLocalBatchSize(config_);
  const v1::DatasetInfo& info = dataset->info();
  for (Slot& slot : slots_) {
    v1::Tensor* f = slot.batch.mutable_features();
    f->set_dtype(normalize_ ? v1::DTYPE_F32 : info.feature_spec().dtype());
    f->mutable_data()->reserve(max_local * feature_elems_ *
                               (normalize_ ? 4 : data::DTypeSize(f->dtype())));
    v1::Tensor* l = slot.batch.mutable_labels();
    l->set_dtype(info.label_spec().dtype());
    l->mutable_data()->reserve(max_local * label_bytes_);
    slot.batch.mutable_sample_ids()->Reserve(max_local);
    if (normalize_) slot.scratch.resize(dataset->feature_bytes());
  }
}

BatchStream::~BatchStream() {
  cancelled_.store(true, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight_));
  if (options_.metrics != nullptr) {
    for (const Slot& slot : slots_) {
      if (slot.state == SlotState::kReady) options_.metrics->queue_depth->Decrement();
    }
  }
}

void BatchStream::ScheduleLocked() {
  const int depth = static_cast<int>(slots_.size());
  const v1::DatasetInfo& info = dataset_->info();
  while (scheduled_ - returned_ < depth &&
         (max_batches_ == 0 || scheduled_ < max_batches_)) {
    const int index = static_cast<int>(scheduled_ % depth);
    Slot& slot = slots_[index];
    const data::Cursor cursor = next_cursor_;
    const std::vector<int64_t>& perm = order_.Get(config_, cursor.epoch);
    const data::IndexRange range =
        data::RankSlice(config_, cursor.step_in_epoch, rank_, cursor.offset);
    v1::Batch& b = slot.batch;
    b.set_epoch(cursor.epoch);
    b.set_step_in_epoch(cursor.step_in_epoch);
    b.set_last_in_epoch(data::IsLastInEpoch(config_, cursor.step_in_epoch, cursor.offset));
    b.set_start_position(cursor.offset);
    b.set_end_position(
        data::GlobalBatchRange(config_, cursor.step_in_epoch, cursor.offset).end);
    b.mutable_sample_ids()->Clear();
    for (int64_t p = range.begin; p < range.end; ++p) b.add_sample_ids(perm[p]);
    v1::Tensor* f = b.mutable_features();
    f->clear_shape();
    f->add_shape(range.size());
    for (int64_t d : info.feature_spec().shape()) f->add_shape(d);
    v1::Tensor* l = b.mutable_labels();
    l->clear_shape();
    l->add_shape(range.size());
    for (int64_t d : info.label_spec().shape()) l->add_shape(d);
    slot.state = SlotState::kPacking;
    ++in_flight_;
    ++scheduled_;
    next_cursor_ = data::Advance(config_, cursor);
    pool_->Submit([this, index] { Pack(index); });
  }
}

void BatchStream::Pack(int index) {
  Slot* slot;
  {
    absl::MutexLock lock(&mu_);
    slot = &slots_[index];  // kPacking: this task owns the slot's contents
  }
  const absl::Time start = absl::Now();
  absl::Status status;
  v1::Batch& b = slot->batch;
  const int64_t n = b.sample_ids_size();
  const int64_t fb = dataset_->feature_bytes();
  std::string* fdata = b.mutable_features()->mutable_data();
  std::string* ldata = b.mutable_labels()->mutable_data();
  fdata->resize(n * (normalize_ ? feature_elems_ * 4 : fb));
  ldata->resize(n * label_bytes_);
  trace::Span span("read and pack batch", "data", static_cast<int64_t>(fdata->size() + ldata->size()));
  uint8_t* fp = reinterpret_cast<uint8_t*>(fdata->data());
  uint8_t* lp = reinterpret_cast<uint8_t*>(ldata->data());
  for (int64_t k = 0; k < n && status.ok(); ++k) {
    if (cancelled_.load(std::memory_order_relaxed)) break;
    const int64_t id = b.sample_ids(k);
    if (normalize_) {
      status = dataset_->ReadSample(id, slot->scratch.data(), lp + k * label_bytes_);
      data::U8ToUnitF32(slot->scratch.data(), feature_elems_,
                        reinterpret_cast<float*>(fp) + k * feature_elems_);
    } else {
      status = dataset_->ReadSample(id, fp + k * fb, lp + k * label_bytes_);
    }
  }
  if (options_.read_delay > absl::ZeroDuration()) {
    const absl::Duration left = options_.read_delay - (absl::Now() - start);
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
  }
  if (options_.metrics != nullptr) {
    options_.metrics->decode_seconds->Increment(
        absl::ToDoubleSeconds(absl::Now() - start));
  }
  absl::MutexLock lock(&mu_);
  slot->status = std::move(status);
  slot->state = SlotState::kReady;
  --in_flight_;
  if (options_.metrics != nullptr) options_.metrics->queue_depth->Increment();
}

absl::StatusOr<const v1::Batch*> BatchStream::Next() {
  absl::MutexLock lock(&mu_);
  if (returned_ == scheduled_) {
    return absl::OutOfRangeError(
        absl::StrCat("stream complete: ", returned_, " batches sent"));
  }
  Slot* slot = &slots_[returned_ % slots_.size()];
  mu_.Await(absl::Condition(
      +[](Slot* s) { return s->state == SlotState::kReady; }, slot));
  if (!slot->status.ok()) return slot->status;
  return &slot->batch;
}

void BatchStream::Release() {
  absl::MutexLock lock(&mu_);
  Slot& slot = slots_[returned_ % slots_.size()];
  if (slot.state != SlotState::kReady) return;  // Release without Next
  slot.state = SlotState::kFree;
  ++returned_;
  if (options_.metrics != nullptr) options_.metrics->queue_depth->Decrement();
  ScheduleLocked();
}

}  // namespace dataserver
}  // namespace tandem
