#include "common/sync/remote/shard_server_state.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/log/log.h"
#include "common/optim/device_stepper.h"
#include "common/shard/optimizer_config.h"
#include "common/shard/replica_memory.h"
#include "common/shard/shard_layout.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {

int PullLanes(const RemoteSyncKnobs& knobs) {
  if (knobs.pull_streams > 0) return knobs.pull_streams;
  const double kDefaultChunkMb = RemoteSyncKnobs().chunk_mb;
  const double lanes = std::ceil(knobs.streams * kDefaultChunkMb / knobs.chunk_mb - 1e-9);
  return static_cast<int>(std::clamp(lanes, static_cast<double>(knobs.streams), 32.0));
}

std::vector<OptionInfo> RemoteSyncOptionInfo() {
  return {{"chunk_mb", "0.25", "MiB of fp32 per chunk pushed to / pulled from a shard server"},
          {"streams", "2", "push streams in flight per shard server (1..16)"},
          {"pull_streams", "0",
           "pull calls in flight per shard server (1..32; 0 = streams x 0.25 / chunk_mb, at "
           "least streams: 2 at the defaults, 8 at chunk_mb=0.0625)"},
          {"timeout_s", "60", "seconds one push stream or pull may take"},
          {"apply", "chunk",
           "chunk: servers apply each chunk as soon as every rank pushed it (pulls overlap "
           "pushes); step: the whole step once all of it is in"},
          {"pipeline", "1",
           "1 = each chunk is pulled as soon as it is pushed and lands during the next forward, "
           "layer by layer; 0 = everything is pulled before FinishStep returns"},
          {"replicate", "1",
           "1 = with >= 2 shard servers each server's range is also held by the next one (at "
           "most one step behind, off the pull's path), so a lost server is rebuilt from memory "
           "with <= 1 step redone; costs 4x a range's master + optimizer state per server and "
           "its last summed gradient; "
           "0 = none, a lost server sends the job to the last checkpoint"}};
}

absl::StatusOr<RemoteSyncKnobs> ParseRemoteSyncKnobs(const SyncOptions& o) {
  RemoteSyncKnobs k;
  ASSIGN_OR_RETURN(k.chunk_mb, GetSyncOptDouble(o, "chunk_mb", k.chunk_mb));
  ASSIGN_OR_RETURN(const int64_t pipeline, GetSyncOptInt(o, "pipeline", 1));
  if (pipeline != 0 && pipeline != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync_opt pipeline must be 1 (pull each chunk as soon as it is pushed) or 0 (pull "
        "everything at the end of the step), got ", pipeline));
  }
  k.pipeline = pipeline == 1;
  ASSIGN_OR_RETURN(const int64_t replicate, GetSyncOptInt(o, "replicate", 1));
  if (replicate != 0 && replicate != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync_opt replicate must be 1 (each shard server's range also held by the next "
        "server) or 0 (none: a lost server means the last checkpoint), got ", replicate));
  }
  k.replicate = replicate == 1;
  ASSIGN_OR_RETURN(int64_t streams, GetSyncOptInt(o, "streams", 2));
  ASSIGN_OR_RETURN(int64_t pull_streams, GetSyncOptInt(o, "pull_streams", k.pull_streams));
  ASSIGN_OR_RETURN(double timeout_s, GetSyncOptDouble(o, "timeout_s", 60));
  if (!(k.chunk_mb > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt chunk_mb must be > 0, got ", k.chunk_mb));
  }
  if (streams < 1 || streams > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt streams must be in 1..16, got ", streams));
  }
  if (pull_streams < 0 || pull_streams > 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync_opt pull_streams must be in 0..32 (0 = from streams and chunk_mb), got ",
        pull_streams));
  }
  k.pull_streams = static_cast<int>(pull_streams);
  if (!(timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt timeout_s must be > 0, got ", timeout_s));
  }
  k.streams = static_cast<int>(streams);
  const auto apply = o.opts.find("apply");
  if (apply != o.opts.end() && apply->second != "step" && apply->second != "chunk") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt apply must be step or chunk, got '", apply->second, "'"));
  }
  k.apply_per_chunk = apply == o.opts.end() || apply->second == "chunk";
  k.timeout = absl::Seconds(timeout_s);
  return k;
}

absl::Status ValidateRemoteSyncOptions(const SyncOptions& o) {
  if (o.max_grad_norm > 0) {
    return absl::UnimplementedError(absl::StrCat(
        "--sync ", o.strategy,
        " does not support max_grad_norm yet (the global norm lives on the shard servers); "
        "use --sync allreduce or zero1/zero2 for clipping"));
  }
  return ParseRemoteSyncKnobs(o).status();
}


namespace {

// Rank 0's header line on the servers' replicas: on (with their memory), or
// why there are none.
void LogReplicas(const std::string& name, const shard::RemoteShards& remote, bool asked,
                 int pull_int8_chunk, size_t state_buffers) {
  const int servers = remote.layout().servers();
  if (remote.replicated()) {
    int64_t widest = 0;
    for (int s = 0; s < servers; ++s) {
      widest = std::max(widest, remote.layout().server_range(s).size());
    }
    const double mib =
        static_cast<double>(shard::ReplicaExtraFloats(widest, state_buffers) * sizeof(float)) /
        (1 << 20);
    LOG(INFO) << name << ": shard-server replicas on: each of the " << servers
              << " servers' ranges is also held by the next server, at most one step behind "
                 "(a lost server is rebuilt from memory, <= 1 step redone); +"
              << absl::StrFormat("%.1f", mib)
              << " MiB per server (--sync_opt replicate=0 turns them off)";
  } else if (servers < 2) {
    LOG(INFO) << name << ": one shard server, so no replica: a lost server resumes from the "
                         "last checkpoint";
  } else {
    LOG(INFO) << name << ": shard-server replicas off ("
              << (!asked ? "--sync_opt replicate=0" : pull_int8_chunk > 0 ? "int8 pulls" : "")
              << "): a lost server resumes from the last checkpoint";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardServerState>> ShardServerState::Create(
    const SyncOptions& options, const SyncEnv& env, const std::string& name,
    int pull_int8_chunk, int push_stride, int push_offset) {
  ASSIGN_OR_RETURN(RemoteSyncKnobs knobs, ParseRemoteSyncKnobs(options));
  const ShardServerEnv& servers = env.shard_servers;
  if (servers.addresses.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync ", name, " needs shard servers: give the worker --shard_servers host:port,... "
        "(or run tandem local --shard_servers N)"));
  }
  if (servers.generation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " sync: SyncEnv.shard_servers.generation must be >= 1"));
  }
  if (env.size > 0 && (env.params == nullptr || env.grads == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " sync: params and grads are required"));
  }
  // The servers run the optimizer the trainer asked for: describe it.
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> probe, env.make_optimizer({0, 0}));
  ASSIGN_OR_RETURN(v1::OptimizerConfig config, shard::DescribeOptimizer(*probe));
  if (env.make_device_stepper) {
    ASSIGN_OR_RETURN(std::unique_ptr<optim::DeviceStepper> d, env.make_device_stepper(probe.get()));
    if (d != nullptr) {
      return absl::UnimplementedError(absl::StrCat(name, " sync: device memory is not supported yet (",
                                                   name, " runs on the CPU backend)"));
    }
  }
  shard::RemoteShardsOptions ro;
  ro.addresses = servers.addresses;
  ro.job_id = servers.job_id;
  ro.generation = servers.generation;
  ro.rank = env.comms->world->rank();
  ro.world_size = env.comms->world->world_size();
  ro.size = env.size;
  ro.chunk_elements = shard::ShardLayout::ChunkElementsForMb(knobs.chunk_mb);
  ro.streams_per_server = knobs.streams;
  ro.pull_streams_per_server = PullLanes(knobs);
  ro.timeout = knobs.timeout;
  ro.apply_per_chunk = knobs.apply_per_chunk;
  ro.pull_int8_chunk = pull_int8_chunk;
  ro.replicate = knobs.replicate;
  ro.push_stride = push_stride;
  ro.push_offset = push_offset;
  ASSIGN_OR_RETURN(std::unique_ptr<shard::RemoteShards> remote, shard::RemoteShards::Create(ro));
  if (ro.rank == 0) {
    LogReplicas(name, *remote, knobs.replicate, pull_int8_chunk, probe->state().size());
  }
  auto mirror = std::make_unique<OptimizerMirror>(*probe, env.size);
  return std::unique_ptr<ShardServerState>(
      new ShardServerState(std::move(remote), std::move(config), std::move(mirror), env.size,
                           knobs.pipeline));
}

absl::Status ShardServerState::InitServers(int rank, int64_t applied_step, const float* params) {
  if (rank != 0) return absl::OkStatus();
  std::vector<std::pair<std::string, const float*>> state;
  if (send_state_) {
    for (size_t i = 0; i < mirror_->names().size(); ++i) {
      state.push_back({mirror_->names()[i], mirror_->buffer(i)});
    }
  }
  absl::Status s = remote_->InitServers(applied_step, config_, params, state);
  send_state_ = false;
  mirror_->Release();
  return s;
}

absl::Status ShardServerState::FetchForCheckpoint(int rank, int64_t last_step) {
  if (skip_next_fetch_) {
    skip_next_fetch_ = false;
    return absl::OkStatus();
  }
  if (rank != 0) return absl::OkStatus();
  mirror_->Materialize();
  for (size_t i = 0; i < mirror_->names().size(); ++i) {
    RETURN_IF_ERROR(remote_->PullState(last_step, mirror_->names()[i], mirror_->buffer(i)));
  }
  release_mirror_ = true;
  return absl::OkStatus();
}

namespace {

// Each server's shard file name and path in r.dir.
void ShardPaths(const ServerSaveRequest& r, int servers, std::vector<std::string>* files,
                std::vector<std::string>* paths) {
  for (int s = 0; s < servers; ++s) {
    files->push_back(checkpoint::ShardFileName(r.step, s, servers));
    paths->push_back(absl::StrCat(r.dir, "/", files->back()));
  }
}

std::vector<SavedShard> Saved(const std::vector<optim::ParamRange>& ranges,
                              const std::vector<std::string>& files) {
  std::vector<SavedShard> out;
  for (size_t s = 0; s < ranges.size(); ++s) {
    if (ranges[s].size() > 0) out.push_back({ranges[s].lo, ranges[s].hi, files[s]});
  }
  return out;
}

absl::Status CheckLastStep(const ServerSaveRequest& r, int64_t last_step) {
  if (r.step == last_step) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint of step ", r.step, " on the shard servers, but their last step is ", last_step));
}

}  // namespace

absl::StatusOr<std::vector<SavedShard>> ShardServerState::SaveOnServers(
    const ServerSaveRequest& r, int64_t last_step) {
  RETURN_IF_ERROR(CheckLastStep(r, last_step));
  std::vector<std::string> files, paths;
  ShardPaths(r, remote_->layout().servers(), &files, &paths);
  ASSIGN_OR_RETURN(std::vector<optim::ParamRange> ranges,
                   remote_->SaveShards(r.step, r.model_fingerprint, paths, r.blobs));
  return Saved(ranges, files);
}

absl::StatusOr<ServerSideCheckpoint::ServerWrite> ShardServerState::SnapshotOnServers(
    const ServerSaveRequest& r, int64_t last_step) {
  RETURN_IF_ERROR(CheckLastStep(r, last_step));
  std::vector<std::string> files, paths;
  ShardPaths(r, remote_->layout().servers(), &files, &paths);
  RETURN_IF_ERROR(
      remote_->SaveShards(r.step, r.model_fingerprint, paths, {}, v1::SAVE_SNAPSHOT).status());
  shard::RemoteShards::SnapshotWrite write = remote_->SnapshotWriter();
  return ServerSideCheckpoint::ServerWrite(
      [write, r, files, paths]() -> absl::StatusOr<std::vector<SavedShard>> {
        ASSIGN_OR_RETURN(std::vector<optim::ParamRange> ranges,
                         write(r.step, r.model_fingerprint, paths, r.blobs));
        return Saved(ranges, files);
      });
}

absl::StatusOr<std::vector<int>> ShardServerState::RecoverFromServers(int rank, int64_t step,
                                                                     float* params) {
  if (rank != 0) {
    return absl::FailedPreconditionError("RecoverFromServers: rank 0 reads the servers");
  }
  mirror_->Materialize();
  std::vector<std::pair<std::string, float*>> state;
  for (size_t i = 0; i < mirror_->names().size(); ++i) {
    state.push_back({mirror_->names()[i], mirror_->buffer(i)});
  }
  absl::StatusOr<std::vector<int>> r = remote_->RecoverState(step, params, state);
  if (!r.ok()) mirror_->Release();
  return r;
}

void ShardServerState::Loaded(int rank) {
  send_state_ = false;
  if (rank == 0 && mirror_->materialized()) {
    for (size_t i = 0; i < mirror_->names().size() && !send_state_; ++i) {
      const float* b = mirror_->buffer(i);
      for (int64_t j = 0; j < size_ && !send_state_; ++j) send_state_ = b[j] != 0.f;
    }
  }
  if (!send_state_) mirror_->Release();
}

void ShardServerState::ReleaseAfterCheckpoint() {
  if (!release_mirror_) return;
  mirror_->Release();
  release_mirror_ = false;
}

}  // namespace sync
}  // namespace tandem
