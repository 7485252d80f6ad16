#include "common/data/prefetch_client.h"


#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/unit_scale.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace data {
namespace {

Cursor After(const v1::Batch& b) {
  if (b.last_in_epoch()) return {b.epoch() + 1, 0, 0};
  return {b.epoch(), b.step_in_epoch() + 1, b.start_position()};
}

// Failures of the transport or the server process, worth another attempt
// (possibly on another server). Everything else is about the request.
bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::CANCELLED:  // a server shutting down cancels calls
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:  // e.g. a stream reset by a dying peer
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<ClientMetrics> ClientMetrics::Create(Metrics* m) {
  ClientMetrics c;
  ASSIGN_OR_RETURN(c.wait_seconds,
                   m->Counter("tandem_data_wait_seconds_total",
                              "Seconds the trainer waited for its next batch."));
  ASSIGN_OR_RETURN(c.reconnects,
                   m->Counter("tandem_data_reconnects_total",
                              "Data streams re-opened after a failure."));
  ASSIGN_OR_RETURN(c.batches, m->Counter("tandem_data_batches_received_total",
                                         "Batches received from data servers."));
  ASSIGN_OR_RETURN(c.bytes, m->Counter("tandem_data_bytes_received_total",
                                       "Feature and label bytes received."));
  return c;
}

absl::StatusOr<std::unique_ptr<PrefetchClient>> PrefetchClient::Start(
    PrefetchOptions options) {
  const v1::StreamBatchesRequest& r = options.request;
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("PrefetchClient: no data servers given");
  }
  if (options.prefetch_depth < 1 || options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PrefetchClient: prefetch_depth (", options.prefetch_depth,
        ") and max_attempts (", options.max_attempts, ") must be >= 1"));
  }
  if (r.global_batch_size() <= 0 || r.world_size() <= 0 || r.rank() < 0 ||
      r.rank() >= r.world_size() || r.max_batches() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PrefetchClient: bad request: global_batch_size ",
        r.global_batch_size(), ", rank ", r.rank(), " of world ",
        r.world_size(), ", max_batches ", r.max_batches()));
  }
  std::unique_ptr<PrefetchClient> client(new PrefetchClient(std::move(options)));
  client->thread_ = std::thread([c = client.get()] { c->Run(); });
  return client;
}

PrefetchClient::PrefetchClient(PrefetchOptions options)
    : options_(std::move(options)),
      normalize_here_(options_.normalize_here && options_.request.normalize_to_f32()),
      slots_(options_.prefetch_depth + 1),
      consumer_cursor_{options_.request.epoch(), options_.request.step_in_epoch(),
                       options_.request.start_position()},
      producer_cursor_{options_.request.epoch(), options_.request.step_in_epoch(),
                       options_.request.start_position()} {
  for (const std::string& target : options_.servers) {
    stubs_.push_back(v1::DataServer::NewStub(MakeChannel({.target = target})));
  }
}

PrefetchClient::~PrefetchClient() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t PrefetchClient::reconnects() const {
  absl::MutexLock lock(&mu_);
  return reconnects_;
}

absl::StatusOr<const HostBatch*> PrefetchClient::Next() {
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  if (holding_) {
    ++consumed_;
    holding_ = false;
  }
  mu_.Await(absl::Condition(
      +[](PrefetchClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
        return c->produced_ > c->consumed_ || c->done_;
      },
      this));
  const absl::Duration waited = absl::Now() - start;
  wait_time_ += waited;
  if (options_.metrics != nullptr) {
    options_.metrics->wait_seconds->Increment(absl::ToDoubleSeconds(waited));
  }
  if (produced_ == consumed_) return final_status_;  // done_, drained
  holding_ = true;
  const HostBatch* b = &slots_[consumed_ % slots_.size()];
  consumer_cursor_ = b->last_in_epoch ? Cursor{b->epoch + 1, 0, 0}
                                      : Cursor{b->epoch, b->step_in_epoch + 1, b->start_position};
  return b;
}

namespace {

// The server's normalisation, bit for bit (unit_scale.h), into `out`.
void U8ToUnitF32(const std::string& in, std::string* out) {
  out->resize(in.size() * sizeof(float));  // same size from the 2nd batch: no fill
  data::U8ToUnitF32(reinterpret_cast<const uint8_t*>(in.data()), static_cast<int64_t>(in.size()),
                    reinterpret_cast<float*>(out->data()));
}

}  // namespace

grpc::Status PrefetchClient::Fill(v1::Batch* msg, HostBatch* slot) {
  if (normalize_here_ && msg->features().dtype() != v1::DTYPE_U8) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("normalize_to_f32 needs u8 features; the server sent ",
                                     v1::DType_Name(msg->features().dtype()),
                                     " (leave normalize_to_f32 off for this dataset)"));
  }
  slot->epoch = msg->epoch();
  slot->step_in_epoch = msg->step_in_epoch();
  slot->last_in_epoch = msg->last_in_epoch();
  slot->start_position = msg->start_position();
  slot->end_position = msg->end_position();
  slot->feature_dtype = msg->features().dtype();
  slot->label_dtype = msg->labels().dtype();
  slot->feature_shape.assign(msg->features().shape().begin(),
                             msg->features().shape().end());
  slot->label_shape.assign(msg->labels().shape().begin(),
                           msg->labels().shape().end());
  // Swap, not copy: the message keeps the slot's old buffer (and its
  // capacity) for the next Read.
  if (normalize_here_) {
    U8ToUnitF32(msg->features().data(), &slot->features);
    slot->feature_dtype = v1::DTYPE_F32;
  } else {
    slot->features.swap(*msg->mutable_features()->mutable_data());
  }
  slot->labels.swap(*msg->mutable_labels()->mutable_data());
  slot->sample_ids.assign(msg->sample_ids().begin(), msg->sample_ids().end());
  return grpc::Status::OK;
}

grpc::Status PrefetchClient::StreamOnce(int server, bool* received_any) {
  v1::StreamBatchesRequest request = options_.request;
  if (normalize_here_) request.set_normalize_to_f32(false);  // Fill does it
  int64_t remaining = 0;
  {
    absl::MutexLock lock(&mu_);
    request.set_epoch(producer_cursor_.epoch);
    request.set_step_in_epoch(producer_cursor_.step_in_epoch);
    request.set_start_position(producer_cursor_.offset);
    if (options_.request.max_batches() > 0) {
      remaining = options_.request.max_batches() - produced_;
    }
  }
  request.set_max_batches(remaining);
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return grpc::Status::CANCELLED;
    active_ = &context;
  }
  std::unique_ptr<grpc::ClientReader<v1::Batch>> reader =
      stubs_[server]->StreamBatches(&context, request);
  const size_t n = slots_.size();
  bool stopped = false;
  grpc::Status filled;
  while (reader->Read(&msg_)) {
    *received_any = true;
    absl::MutexLock lock(&mu_);
    // Wait for a free slot: the consumer holds at most one, so `n` slots
    // leave prefetch_depth ready batches.
    mu_.Await(absl::Condition(
        +[](PrefetchClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
          return c->stop_ || c->produced_ - c->consumed_ < static_cast<int64_t>(c->slots_.size());
        },
        this));
    if (stop_) {
      stopped = true;
      break;
    }
    HostBatch* slot = &slots_[produced_ % n];
    if (options_.metrics != nullptr) {
      options_.metrics->batches->Increment();
      options_.metrics->bytes->Increment(static_cast<double>(
          msg_.features().data().size() + msg_.labels().data().size()));
    }
    filled = Fill(&msg_, slot);  // the slot is free: the consumer cannot see it yet
    if (!filled.ok()) break;
    producer_cursor_ = After(msg_);
    ++produced_;
  }
  // Finish() would wait for a stream we no longer read; cancel it first.
  if (stopped || !filled.ok()) context.TryCancel();
  grpc::Status status = reader->Finish();
  if (!filled.ok()) status = filled;
  absl::MutexLock lock(&mu_);
  active_ = nullptr;
  return status;
}

void PrefetchClient::Run() {
  const int num_servers = static_cast<int>(stubs_.size());
  int server = options_.request.rank() % num_servers;
  int failures = 0;
  absl::Duration backoff = options_.initial_backoff;
  absl::Status final_status;
  for (;;) {
    bool received_any = false;
    const grpc::Status s = StreamOnce(server, &received_any);
    {
      absl::MutexLock lock(&mu_);
      if (stop_) {
        final_status = absl::CancelledError("PrefetchClient stopped");
        break;
      }
      const int64_t max = options_.request.max_batches();
      if (s.ok() && max > 0 && produced_ >= max) {
        final_status = absl::OutOfRangeError(
            absl::StrCat("all ", max, " batches delivered"));
        break;
      }
    }
    if (!s.ok() && !Retryable(s.error_code())) {
      final_status = FromGrpcStatus(
          s, absl::StrCat("DataServer.StreamBatches to ", options_.servers[server]));
      break;
    }
    // The stream broke (or ended early): back off and reconnect, to the next
    // server if there are several.
    if (received_any) {
      failures = 0;
      backoff = options_.initial_backoff;
    }
    if (++failures >= options_.max_attempts) {
      final_status = absl::UnavailableError(absl::StrCat(
          "no data server reachable after ", failures, " attempts; last: ",
          options_.servers[server], ": ", s.error_message()));
      break;
    }
    if (options_.metrics != nullptr) options_.metrics->reconnects->Increment();
    absl::MutexLock lock(&mu_);
    ++reconnects_;
    // Interruptible backoff: the destructor sets stop_.
    mu_.AwaitWithTimeout(absl::Condition(&stop_), backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
    server = (server + 1) % num_servers;
    // A fresh channel connects at once; the old one may sit in gRPC's
    // reconnect backoff after the connection that just failed.
    stubs_[server] = v1::DataServer::NewStub(
        MakeChannel({.target = options_.servers[server]}));
  }
  absl::MutexLock lock(&mu_);
  final_status_ = final_status;
  done_ = true;
}

}  // namespace data
}  // namespace tandem
