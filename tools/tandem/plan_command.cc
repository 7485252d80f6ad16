#include "tools/tandem/plan_command.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/io/file.h"
#include "common/nn/model_spec.h"
#include "common/plan/calibrate.h"
#include "common/plan/gpu_profile.h"
#include "common/plan/recovery_memory.h"
#include "common/status/status_macros.h"
#include "tools/tandem/link_rate.h"
#include "tools/tandem/plan_rpc_calibrate.h"

namespace tandem {
namespace cli {
namespace {

std::string DefaultProfilePath(const std::string& home) {
  return home.empty() ? "" : home + "/.config/tandem/plan_profile";
}

double MiB(double bytes) { return bytes / (1 << 20); }

// What the plan recommends: the fastest strategy that trains the same
// numbers (not lossy) and fits in memory; among those within tie_fraction
// of it, the one needing least memory per worker. The fastest overall when
// every strategy is lossy; none when nothing fits.
struct Recommendation {
  const plan::Prediction* best = nullptr;
  std::vector<const plan::Prediction*> tied;  // within tie_fraction of the fastest, best included
};

Recommendation Recommend(const std::vector<plan::Prediction>& ps, double tie_fraction) {
  Recommendation r;
  std::vector<const plan::Prediction*> candidates;
  for (const plan::Prediction& p : ps) {
    if (!p.lossy && p.fits) candidates.push_back(&p);
  }
  if (candidates.empty()) {
    for (const plan::Prediction& p : ps) {
      if (p.fits) candidates.push_back(&p);
    }
  }
  if (candidates.empty()) return r;
  const double limit = candidates[0]->step_s * (1 + tie_fraction);
  r.best = candidates[0];
  for (const plan::Prediction* p : candidates) {
    if (p->step_s > limit) break;
    r.tied.push_back(p);
    if (p->total_bytes() < r.best->total_bytes()) r.best = p;
  }
  return r;
}

// "latency 62%": the part whose cost, made free, shortens the step most,
// and by how much of the step.
std::string BoundText(const plan::Prediction& p) {
  const double s = std::max({p.link_bound_s, p.cpu_bound_s, p.latency_bound_s});
  return absl::StrFormat("%s %.0f%%", p.bound, p.step_s > 0 ? 100 * s / p.step_s : 0);
}

std::string ShardRoundText(const plan::MachineProfile& m, int workers) {
  if (plan::ShardRoundSeconds(m, workers) == 0) return "shard-server call rounds not measured";
  return absl::StrFormat("shard-server call round %.0f us at %d workers",
                         plan::ShardRoundSeconds(m, workers) * 1e6, workers);
}

std::string Rate(double per_s, const char* unit) {
  if (per_s >= 1e12) return absl::StrFormat("%.1f T%s", per_s / 1e12, unit);
  return absl::StrFormat("%.1f G%s", per_s / 1e9, unit);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string StrategyLocalFlags(const PlanOptions& o, const std::string& strategy) {
  if (strategy == "hier") return "--sync allreduce --sync_opt hier=1";
  if (strategy == "ps" || strategy == "hybrid") {
    return absl::StrCat("--sync ", strategy, " --shard_servers ", std::max(o.servers, 1),
                        o.shard_replicas ? "" : " --sync_opt replicate=0");
  }
  constexpr absl::string_view kCompressed = "compressed:";
  if (absl::StartsWith(strategy, kCompressed)) {
    std::string codec(strategy.substr(kCompressed.size()));
    // "topk=0.01" is the codec and its fraction: codec=topk,k=0.01.
    if (absl::StartsWith(codec, "topk=")) codec = absl::StrCat("topk,k=", codec.substr(5));
    if (absl::StartsWith(codec, "powersgd=")) {
      codec = absl::StrCat("powersgd,rank=", codec.substr(9));
    }
    return absl::StrCat("--sync compressed --sync_opt codec=", codec);
  }
  return absl::StrCat("--sync ", strategy);
}

std::string CommonLocalFlags(const PlanOptions& o) {
  std::string out = absl::StrCat("--model ", o.model, " --batch_size ", o.batch_size);
  if (o.nodes > 1) {
    absl::StrAppend(&out, " --nodes ", o.nodes, " --workers_per_node ", o.per_node);
    if (!o.link.empty()) absl::StrAppend(&out, " --link ", o.link);
  } else {
    absl::StrAppend(&out, " --workers ", o.per_node);
  }
  if (o.optimizer != PlanOptions().optimizer) absl::StrAppend(&out, " --optimizer ", o.optimizer);
  if (o.bucket_cap_mb != PlanOptions().bucket_cap_mb) {
    absl::StrAppend(&out, " --bucket_cap_mb ", o.bucket_cap_mb);
  }
  return out;
}

absl::StatusOr<plan::PlanRequest> PlanRequestFrom(const PlanOptions& o,
                                                  const plan::MachineProfile& profile) {
  auto spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model: ", spec.status().message()));
  }
  plan::PlanRequest r;
  ASSIGN_OR_RETURN(r.model, plan::ModelCostOf(*spec));
  r.batch = o.batch_size;
  r.optimizer = o.optimizer;
  r.bucket_cap_mb = o.bucket_cap_mb;
  r.machine = profile;
  r.cluster.nodes = o.nodes;
  r.cluster.per_node = o.per_node;
  r.cluster.servers = o.servers;
  r.shard_replicas = o.shard_replicas;
  r.cluster.one_host = o.one_host;
  r.cluster.cpu_share = o.cpu_share;
  if (!o.link.empty()) {
    auto bps = ParseLinkRate(o.link);
    if (!bps.ok()) return absl::InvalidArgumentError(absl::StrCat("--link: ", bps.status().message()));
    r.cluster.link_bits_per_s = static_cast<double>(*bps);
  }
  if (!o.server_link.empty()) {
    auto bps = ParseLinkRate(o.server_link);
    if (!bps.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--server_link: ", bps.status().message()));
    }
    r.cluster.server_link_bits_per_s = static_cast<double>(*bps);
  }
  return r;
}

namespace {

std::string FormatJson(const PlanOptions& o, const plan::PlanRequest& r,
                       const std::vector<plan::Prediction>& ps) {
  const std::string common = CommonLocalFlags(o);
  std::string out = "{\"predictions\": [";
  for (size_t i = 0; i < ps.size(); ++i) {
    const plan::Prediction& p = ps[i];
    absl::StrAppendFormat(
        &out,
        "%s\n  {\"strategy\": %s, \"step_s\": %.6g, \"samples_per_s\": %.6g, "
        "\"forward_s\": %.6g, \"backward_s\": %.6g, \"comm_s\": %.6g, \"exposed_comm_s\": %.6g, "
        "\"finish_s\": %.6g, \"control_s\": %.6g, \"burst_saved_s\": %.6g, \"node_link_bytes\": %.6g, \"param_bytes\": %d, \"grad_bytes\": %d, "
        "\"optimizer_bytes\": %d, \"activation_bytes\": %d, \"server_bytes\": %d, "
        "\"lossy\": %s, \"fits\": %s, \"bottleneck\": %s, \"bound\": %s, \"link_bound_s\": %.6g, "
        "\"cpu_bound_s\": %.6g, \"latency_bound_s\": %.6g, \"host_cpu_s\": %.6g, "
        "\"cpu_floor_s\": %.6g, \"worker_work_s\": %.6g, \"worker_rounds\": %.6g, "
        "\"worker_calls\": %.6g, \"round_cpu_s\": %.6g, \"call_cpu_s\": %.6g, "
        "\"step_cpu_s\": %.6g, \"server_cpu_s\": %.6g, \"flags\": %s}",
        i == 0 ? "" : ",", JsonString(p.strategy), p.step_s, p.samples_per_s, p.forward_s,
        p.backward_s, p.comm_s, p.exposed_comm_s, p.finish_s, p.control_s, p.burst_saved_s, p.node_link_bytes, p.param_bytes,
        p.grad_bytes, p.optimizer_bytes, p.activation_bytes, p.server_bytes,
        p.lossy ? "true" : "false", p.fits ? "true" : "false", JsonString(p.bottleneck),
        JsonString(p.bound), p.link_bound_s, p.cpu_bound_s, p.latency_bound_s, p.host_cpu_s,
        p.cpu_floor_s, p.worker_work_s, p.worker_rounds, p.worker_calls, p.round_cpu_s,
        p.call_cpu_s, p.step_cpu_s, p.server_cpu_s, JsonString(absl::StrCat(common, " ", StrategyLocalFlags(o, p.strategy))));
  }
  const Recommendation rec = Recommend(ps, o.tie_fraction);
  std::string tied;
  for (const plan::Prediction* p : rec.tied) {
    absl::StrAppend(&tied, tied.empty() ? "" : ", ", JsonString(p->strategy));
  }
  absl::StrAppend(&out, "\n], \"recommended\": ",
                  rec.best == nullptr ? "null" : JsonString(rec.best->strategy), ", \"tied\": [",
                  tied, "], \"profile\": ", JsonString(r.machine.source),
                  ", \"profile_kind\": ", JsonString(r.machine.kind), "}\n");
  return out;
}

std::string FormatHeader(const plan::PlanRequest& r) {
  const plan::Cluster& c = r.cluster;
  const plan::MachineProfile& m = r.machine;
  std::string links = "unshaped (loopback)";
  if (c.link_bits_per_s > 0) {
    links = FormatLinkRate(static_cast<int64_t>(c.link_bits_per_s));
  } else if (c.nodes > 1 && m.node_link_bits_per_s > 0) {
    links = absl::StrCat(FormatLinkRate(static_cast<int64_t>(m.node_link_bits_per_s)),
                         " per node (the profile's node network)");
  }
  std::string out = absl::StrFormat(
      "tandem plan: %d parameters, %.2f MFLOP per sample; batch %d per worker; %d node(s) x %d "
      "worker(s)%s, links %s%s\n",
      r.model.parameters, r.model.train_flops / 1e6, r.batch, c.nodes, c.per_node,
      c.servers > 0 ? absl::StrCat(", ", c.servers, " shard server(s)") : "", links,
      c.one_host ? ", all on this machine" : "");
  if (m.per_rank_device()) {
    absl::StrAppendFormat(&out,
                          "profile: %s\n  %s per worker, %s HBM, %s NVLink per direction, %.0f GB "
                          "per worker\n\n",
                          m.source, Rate(m.gemm_flops_per_s, "FLOP/s"),
                          Rate(m.stream_bytes_per_s, "B/s"), Rate(m.intra_node_bytes_per_s, "B/s"),
                          m.memory_bytes_per_rank / 1e9);
  } else {
    absl::StrAppendFormat(&out,
                          "profile: %s\n  %.1f GFLOP/s per worker, %.1f GB/s streaming, loopback "
                          "%.2f GB/s, ring round %.0f us at %d ranks, %d core(s), %s\n\n",
                          m.source, m.gemm_flops_per_s / 1e9, m.stream_bytes_per_s / 1e9,
                          m.loopback_bytes_per_s / 1e9, (c.one_host ? plan::RingRoundSeconds(m, c.ranks()) : m.link_alpha_s) * 1e6,
                          c.one_host ? c.ranks() : 2, m.cores,
                          ShardRoundText(m, c.one_host ? c.ranks() : c.per_node));
  }
  return out;
}

std::string FormatRecommendation(const PlanOptions& o, const std::vector<plan::Prediction>& ps) {
  const Recommendation rec = Recommend(ps, o.tie_fraction);
  if (rec.best == nullptr) {
    return "\nno strategy fits in the memory per worker: use more workers (zero3 and ps keep less "
           "per worker), a smaller --batch_size or a GPU with more memory\n";
  }
  const plan::Prediction& best = *rec.best;
  std::string out = absl::StrCat("\nrecommended: tandem local ", CommonLocalFlags(o), " ",
                                  StrategyLocalFlags(o, best.strategy), " (", best.why, ")");
  absl::StrAppend(&out, "; bound by ", BoundText(best));
  for (const plan::Prediction& p : ps) {
    const bool tied = std::find(rec.tied.begin(), rec.tied.end(), &p) != rec.tied.end();
    if (tied || p.lossy || !p.fits) continue;
    absl::StrAppendFormat(&out, "; %.2fx faster than %s (bound by %s)", p.step_s / best.step_s,
                          p.strategy, BoundText(p));
    break;
  }
  if (rec.tied.size() > 1) {
    std::vector<std::string> names;
    for (const plan::Prediction* p : rec.tied) names.push_back(p->strategy);
    absl::StrAppendFormat(&out,
                          "\n  %s are within %.0f%% of each other's step time, a tie for this "
                          "model: %s is chosen for the least memory per worker (%.1f MiB",
                          absl::StrJoin(names, ", "), 100 * o.tie_fraction, best.strategy,
                          MiB(best.total_bytes()));
    if (rec.tied[0] != &best) {
      absl::StrAppendFormat(&out, " against %.1f MiB for %s", MiB(rec.tied[0]->total_bytes()),
                            rec.tied[0]->strategy);
    }
    absl::StrAppend(&out, ")");
  }
  if (ps[0].lossy && &ps[0] != &best) {
    absl::StrAppendFormat(&out,
                          "\n  %s (%s) is %.2fx faster still, if the job's accuracy holds "
                          "with it (check: tools/bench/strategies.sh)",
                          ps[0].strategy, StrategyLocalFlags(o, ps[0].strategy),
                          best.step_s / ps[0].step_s);
  }
  absl::StrAppend(&out,
                  "\ncomm ms = communication backward did not hide; link MiB = bytes leaving one "
                  "node per step; * = lossy (compression); bound = link (bytes over the rate), "
                  "CPU (compute, codecs, shard-server calls) or latency (ring rounds, the step "
                  "vote): the part that, were it free, would shorten the step most, and by how "
                  "much of it\n");
  return out;
}

}  // namespace

std::string FormatPlan(const PlanOptions& o, const plan::PlanRequest& r,
                       const std::vector<plan::Prediction>& ps) {
  if (o.json) return FormatJson(o, r, ps);
  std::string out = FormatHeader(r);
  absl::StrAppendFormat(&out, "%-22s %10s %11s %10s %10s %12s %12s  %-16s  %-12s  %s\n",
                        "strategy", "step ms", "samples/s", "comm ms", "finish ms", "link MiB",
                        "MiB/worker", "bottleneck", "bound", "flags");
  for (const plan::Prediction& p : ps) {
    absl::StrAppendFormat(&out,
                          "%-22s %10.2f %11.0f %10.2f %10.2f %12.1f %12.1f  %-16s  %-12s  %s\n",
                          p.lossy ? p.strategy + " *" : p.strategy, p.step_s * 1e3,
                          p.samples_per_s, p.exposed_comm_s * 1e3, p.finish_s * 1e3,
                          MiB(p.node_link_bytes), MiB(p.total_bytes()),
                          p.fits ? p.bottleneck : "does not fit", BoundText(p),
                          StrategyLocalFlags(o, p.strategy));
  }
  absl::StrAppend(&out, "every row runs as: tandem local ", CommonLocalFlags(o), " FLAGS\n");
  absl::StrAppend(&out, "\nrecovery memory (losing no work: in-memory recovery, background "
                        "checkpoints, shard-server replicas):\n");
  for (const plan::Prediction& p : ps) {
    absl::StrAppend(&out, "  ", plan::FormatRecoveryMemory(plan::RecoveryMemoryOf(r, p)), "\n");
  }
  return out + FormatRecommendation(o, ps);
}

absl::StatusOr<std::string> RunPlan(const PlanOptions& o, const std::string& home) {
  const std::string path = o.profile.empty() ? DefaultProfilePath(home) : o.profile;
  std::string notes;
  plan::MachineProfile profile;
  if (!(o.tie_fraction >= 0 && o.tie_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tie_fraction must be in [0, 1), e.g. 0.03, got ", o.tie_fraction));
  }
  if (!o.gpu.empty()) {
    if (o.calibrate || !o.profile.empty() || o.one_host) {
      return absl::InvalidArgumentError(
          "--gpu plans from datasheet figures; --calibrate, --profile and --one_host describe "
          "this machine: give --gpu or those, not both (a GPU profile measured by "
          "tools/gpu/check.sh is read with --profile)");
    }
    plan::GpuProfileOptions g;
    g.gpu = o.gpu;
    g.math = o.gpu_math;
    g.gemm_efficiency = o.gpu_efficiency;
    ASSIGN_OR_RETURN(profile, plan::GpuProfile(g));
  } else if (o.calibrate) {
    plan::CalibrateOptions co;
    co.model = o.model;
    co.batch = o.batch_size;
    ASSIGN_OR_RETURN(profile, plan::Calibrate(co));
    // Shard-server rounds, as the ring rounds (after them: this forks).
    // Each with the chunk ps / hybrid would push for the model with a
    // server per two workers (ps_sync.h: a server's range, at most 0.25
    // MiB); the CPU per call from the largest (16 workers, 8 servers).
    ASSIGN_OR_RETURN(plan::PlanRequest model, PlanRequestFrom(o, profile));
    for (auto [workers, field] :
         {std::pair{2, &profile.shard_round_2_s}, {4, &profile.shard_round_4_s},
          {8, &profile.shard_round_8_s}, {16, &profile.shard_round_16_s}}) {
      ShardRoundOptions so;
      so.workers = workers;
      const int64_t servers = std::max(1, workers / 2);
      so.floats = std::min<int64_t>((model.model.flat_size + servers - 1) / servers, 1 << 16);
      ASSIGN_OR_RETURN(ShardRound round, MeasureShardRound(so));
      *field = round.round_s;
      profile.shard_call_cpu_s = round.call_cpu_s;
    }
    if (!path.empty()) {
      const size_t slash = path.rfind('/');
      if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirectories(path.substr(0, slash)));
      RETURN_IF_ERROR(plan::SaveMachineProfile(profile, path));
      absl::StrAppend(&notes, "calibrated; profile saved to ", path, "\n");
    }
  } else if (!path.empty()) {
    auto loaded = plan::LoadMachineProfile(path);
    if (loaded.ok()) {
      profile = *loaded;
    } else if (!o.profile.empty() || !absl::IsNotFound(loaded.status())) {
      return loaded.status();  // a profile asked for by name must load
    }
  }
  ASSIGN_OR_RETURN(plan::PlanRequest r, PlanRequestFrom(o, profile));
  ASSIGN_OR_RETURN(std::vector<plan::Prediction> ps, plan::PredictAll(r));
  return notes + FormatPlan(o, r, ps);
}

}  // namespace cli
}  // namespace tandem
