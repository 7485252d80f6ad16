#include "tools/tandem/doctor.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem {
namespace cli {
namespace {

constexpr double kMiB = 1 << 20;

// One worker's totals, from its counters.
struct WorkerTotals {
  std::string name;
  double forward = 0, backward = 0, comm_wait = 0, optimizer = 0, data_wait = 0;
  double steps = 0, step_seconds = 0;
  double sync_bytes = 0, inter_node_bytes = 0, sync_seconds = 0;
  double buckets = 0;
  double memory[4] = {0, 0, 0, 0};  // params, grads, optimizer, staging
  std::string strategy, blas_core, vector_width;
  double phases() const { return forward + backward + comm_wait + optimizer + data_wait; }
  double compute_per_step() const { return steps > 0 ? (forward + backward) / steps : 0; }
};

WorkerTotals Totals(const ProcessMetrics& p) {
  WorkerTotals w;
  w.name = p.name;
  const auto& s = p.samples;
  const std::string phase = "tandem_step_phase_seconds_total";
  w.forward = SumOf(s, phase, {{"phase", "forward"}});
  w.backward = SumOf(s, phase, {{"phase", "backward"}});
  w.comm_wait = SumOf(s, phase, {{"phase", "comm_wait"}});
  w.optimizer = SumOf(s, phase, {{"phase", "optimizer"}});
  w.data_wait = SumOf(s, phase, {{"phase", "data_wait"}});
  w.steps = SumOf(s, "tandem_step_seconds_count");
  w.step_seconds = SumOf(s, "tandem_step_seconds_sum");
  w.sync_bytes = SumOf(s, "tandem_sync_bytes_total");
  w.inter_node_bytes = SumOf(s, "tandem_sync_inter_node_bytes_total");
  w.sync_seconds = SumOf(s, "tandem_sync_seconds_total");
  w.buckets = SumOf(s, "tandem_buckets");
  const char* kinds[4] = {"params", "grads", "optimizer", "staging"};
  for (int i = 0; i < 4; ++i) w.memory[i] = SumOf(s, "tandem_sync_memory_bytes", {{"kind", kinds[i]}});
  if (auto b = FindSample(s, "tandem_sync_bytes_total")) {
    auto it = b->labels.find("strategy");
    if (it != b->labels.end()) w.strategy = it->second;
  }
  if (auto k = FindSample(s, "tandem_cpu_kernels")) {
    w.blas_core = k->labels["blas_core"];
    w.vector_width = k->labels["vector_width"];
  }
  return w;
}

bool IsWorker(const ProcessMetrics& p) {
  return FindSample(p.samples, "tandem_step_phase_seconds_total").has_value();
}
bool IsDataServer(const ProcessMetrics& p) {
  return FindSample(p.samples, "tandem_data_batches_served_total").has_value();
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// What gradients move at: the node link when they cross nodes and the link
// is known, else the local rate.
double WireRate(const WorkerTotals& w, const DoctorOptions& o) {
  return w.inter_node_bytes > 0 && o.link_bits_per_s > 0 ? o.link_bits_per_s / 8
                                                         : o.local_bytes_per_s;
}

std::string Pct(double share) { return absl::StrFormat("%.0f%%", 100 * share); }

// The data servers' totals, summed over servers.
struct DataTotals {
  int servers = 0;
  double batches = 0, decode_seconds = 0, queue_depth = 0;
};

// A rank the coordinator names a straggler (its tandem_straggler series
// at 1 when the metrics were read).
struct NamedStraggler {
  std::string rank, cause;
};

// What every check reads: the job's totals, the averaged shares and the
// verdict already in `d`, the options, and the coordinator's stragglers.
struct Evidence {
  const std::vector<WorkerTotals>& workers;
  const DataTotals& data;
  const Diagnosis& d;
  const DoctorOptions& o;
  const std::vector<NamedStraggler>& named;
  const WorkerTotals& w0() const { return workers[0]; }
  double compute() const { return d.forward + d.backward; }
};

// Fills the per-worker means of `d` (shares, steps, step time).
absl::Status AverageShares(const std::vector<WorkerTotals>& workers, const DoctorOptions& o,
                           Diagnosis* d) {
  d->workers = static_cast<int>(workers.size());
  double total = 0;
  for (const WorkerTotals& w : workers) {
    if (w.steps <= 0 || w.phases() <= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          w.name, " has not finished a training step yet; run the doctor once the job trains"));
    }
    d->forward += w.forward / w.phases();
    d->backward += w.backward / w.phases();
    d->comm_wait += w.comm_wait / w.phases();
    // A ring moves under 2x the buffer per rank: more wait than that is
    // waiting for peers (a slow or data-starved rank), not for the wire.
    const double wire_seconds = 2 * w.sync_bytes / WireRate(w, o);
    d->comm_wire += std::min(w.comm_wait, wire_seconds) / w.phases();
    d->optimizer += w.optimizer / w.phases();
    d->data_wait += w.data_wait / w.phases();
    d->steps += w.steps;
    total += w.step_seconds;
  }
  const double n = d->workers;
  for (double* share : {&d->forward, &d->backward, &d->comm_wait, &d->comm_wire, &d->optimizer,
                        &d->data_wait, &d->steps}) {
    *share /= n;
  }
  d->step_ms = 1e3 * total / (d->steps * n);
  return absl::OkStatus();
}

// The largest of compute, wire, data wait and optimizer names the verdict.
const char* Verdict(const Diagnosis& d) {
  struct Share {
    double share;
    const char* verdict;
  };
  const Share shares[4] = {{d.forward + d.backward, "compute-bound"},
                           {d.comm_wire, "communication-bound"},
                           {d.data_wait, "data-bound"},
                           {d.optimizer, "optimizer-bound"}};
  return std::max_element(shares, shares + 4, [](const Share& a, const Share& b) {
           return a.share < b.share;
         })->verdict;
}

void CheckData(const Evidence& e, std::vector<Finding>* findings) {
  const Diagnosis& d = e.d;
  if (d.data_wait < 0.10 && d.verdict != "data-bound") return;
  Finding f{"data", "", ""};
  f.evidence = absl::StrFormat("%s of step time waits for the next batch", Pct(d.data_wait));
  if (e.data.servers > 0 && e.data.batches > 0) {
    absl::StrAppendFormat(&f.evidence,
                          "; %d data server(s) spent %.2f ms of decode thread time per batch, "
                          "%.0f batch(es) queued now",
                          e.data.servers, 1e3 * e.data.decode_seconds / e.data.batches,
                          e.data.queue_depth);
  }
  f.advice = e.data.queue_depth < 1
                 ? "the data servers are not keeping ahead: give them more decode threads "
                   "(dataserver --decode_threads) or add data servers (worker --data_servers); "
                   "a deeper --prefetch_depth absorbs bursts"
                 : "batches are queued at the server yet workers wait: the transport is the "
                   "limit (more streams per worker, data servers closer to the workers)";
  findings->push_back(f);
}

void CheckPeerWait(const Evidence& e, std::vector<Finding>* findings) {
  const double peer_wait = e.d.comm_wait - e.d.comm_wire;
  if (peer_wait < 0.10) return;
  findings->push_back(
      {"waiting for peers",
       absl::StrFormat("%s of step time is spent inside collectives beyond what the bytes need "
                       "(%.2f MiB per step at %.0f MB/s): ranks wait for slower ones",
                       Pct(peer_wait), e.w0().sync_bytes / e.d.steps / kMiB,
                       WireRate(e.w0(), e.o) / 1e6),
       "fix what makes one rank slow (see the data, straggler and kernels lines), not the "
       "network"});
}

// The flags worth trying for a communication-bound job, most specific first.
std::string CommunicationAdvice(const Evidence& e, double bytes_per_step, double inter_per_step) {
  const WorkerTotals& w0 = e.w0();
  std::vector<std::string> advice;
  // A cap that splits the gradient (its size: the grads memory the
  // strategy reports, else the bytes per step) into about 4 buckets; a
  // cap at or above the gradient would leave it one bucket, and a gradient
  // under a quarter MiB has nothing worth overlapping.
  const double grad_mib = (w0.memory[1] > 0 ? w0.memory[1] : bytes_per_step) / kMiB;
  if (w0.buckets <= 1 && grad_mib >= 0.25) {
    const double cap = grad_mib / 4;
    advice.push_back(absl::StrCat(
        "one bucket per step leaves nothing to overlap with backward: --sync_opt bucket_cap_mb=",
        cap >= 1 ? absl::StrFormat("%.0f", cap) : absl::StrFormat("%.2g", cap),
        absl::StrFormat(" (about 4 buckets of the %.2g MiB gradient)", grad_mib)));
  }
  if (inter_per_step > 0 && w0.strategy == "allreduce" && !e.o.hier) {
    advice.push_back(
        "with several workers per node, --sync_opt hier=1 (reduce inside each node first, "
        "cross nodes once)");
  }
  if (inter_per_step > 0 && Has(e.o.strategies, "hybrid")) {
    advice.push_back("--sync hybrid with shard servers (tandem local --shard_servers)");
  }
  if (Has(e.o.strategies, "compressed")) {
    advice.push_back("--sync compressed --sync_opt codec=int8 (about 4x fewer bytes; check accuracy)");
  }
  advice.push_back("`tandem plan` predicts each strategy on this cluster");
  std::string out;
  for (size_t i = 0; i < advice.size(); ++i) absl::StrAppend(&out, i == 0 ? "" : "; ", advice[i]);
  return out;
}

void CheckCommunication(const Evidence& e, std::vector<Finding>* findings) {
  const Diagnosis& d = e.d;
  if (d.comm_wire < 0.10 && d.verdict != "communication-bound") return;
  const WorkerTotals& w0 = e.w0();
  Finding f{"communication", "", ""};
  const double per_step = w0.sync_bytes / d.steps;
  const double inter = w0.inter_node_bytes / d.steps;
  f.evidence = absl::StrFormat(
      "%s of step time waits for gradient sync (%s); %.1f MiB per step per worker through the "
      "communicator in %.0f bucket(s)",
      Pct(d.comm_wire), w0.strategy.empty() ? "strategy unknown" : w0.strategy, per_step / kMiB,
      w0.buckets);
  if (inter > 0 && w0.sync_seconds > 0) {
    const double rate = 8 * w0.inter_node_bytes / w0.sync_seconds;
    absl::StrAppendFormat(&f.evidence, ", %.1f MiB across nodes at %.0f Mbit/s", inter / kMiB,
                          rate / 1e6);
    if (e.o.link_bits_per_s > 0) {
      absl::StrAppendFormat(&f.evidence, " (%.0f%% of the %.0f Mbit/s link)",
                            100 * rate / e.o.link_bits_per_s, e.o.link_bits_per_s / 1e6);
    }
  }
  f.advice = CommunicationAdvice(e, per_step, inter);
  findings->push_back(f);
}

void CheckCompute(const Evidence& e, std::vector<Finding>* findings) {
  if (e.compute() < 0.5 && e.d.verdict != "compute-bound") return;
  findings->push_back({"compute",
                       absl::StrFormat("%s of step time is forward + backward (%.1f ms per step)",
                                       Pct(e.compute()), 1e3 * e.w0().compute_per_step()),
                       "the hardware is the limit: more workers, a larger batch per worker, or "
                       "--backend cuda"});
}

// A BLAS kernel weaker than the CPU supports: first, since it is the cheapest fix.
void CheckKernels(const Evidence& e, std::vector<Finding>* findings) {
  const WorkerTotals& w0 = e.w0();
  if (w0.blas_core.empty()) return;
  const std::string better = kernels::RecommendedOpenblasCoretype(e.o.cpu, w0.blas_core);
  if (better.empty()) return;
  findings->insert(
      findings->begin(),
      {"kernels",
       absl::StrFormat("OpenBLAS runs its %s kernels, but this CPU supports %s (vector width %s)",
                       w0.blas_core, better, w0.vector_width),
       absl::EqualsIgnoreCase(e.o.user_coretype, w0.blas_core)
           ? absl::StrCat("OPENBLAS_CORETYPE=", e.o.user_coretype,
                          " is set in the environment; if not on purpose (some CPUs need it for "
                          "correct results), unset it or set ",
                          better)
           : absl::StrCat("run with OPENBLAS_CORETYPE=", better,
                          " (tandem local sets it for its children unless the environment "
                          "already does)")});
}

void CheckOptimizer(const Evidence& e, std::vector<Finding>* findings) {
  if (e.d.optimizer < 0.15) return;
  findings->push_back(
      {"optimizer", absl::StrFormat("%s of step time is the optimizer step", Pct(e.d.optimizer)),
       e.workers.size() > 1
           ? absl::StrFormat("--sync zero1 (or zero2) steps 1/%d of the model per worker",
                             e.d.workers)
           : std::string()});
}

// Compute per step against the median worker.
void CheckStragglers(const Evidence& e, std::vector<Finding>* findings) {
  if (e.workers.size() < 2) return;
  std::vector<double> per;
  for (const WorkerTotals& w : e.workers) per.push_back(w.compute_per_step());
  const double med = Median(per);
  for (const WorkerTotals& w : e.workers) {
    if (med > 0 && w.compute_per_step() > 1.25 * med) {
      findings->push_back(
          {"straggler",
           absl::StrFormat("%s computes %.1f ms per step, the median worker %.1f ms (%.0f%% "
                           "slower); every other rank waits for it in each collective",
                           w.name, 1e3 * w.compute_per_step(), 1e3 * med,
                           100 * (w.compute_per_step() / med - 1)),
           "look for another load on its host (or a slower host); move it or drop it"});
    }
  }
}

// The ranks the coordinator named live (services/coordinator/
// straggler_detector.h), with advice for the cause it found.
void CheckNamedStragglers(const Evidence& e, std::vector<Finding>* findings) {
  for (const NamedStraggler& s : e.named) {
    std::string advice = "look for another load on its host (or a slower host or GPU); move it "
                         "or drop it";
    if (s.cause == "data") {
      advice = "its data server or the path to it is slow: raise the data server's "
               "--decode_threads, or give that rank a data server of its own";
    } else if (s.cause == "network") {
      advice = "its link is slower than the others': check its NIC and path; --sync compressed "
               "or hybrid sends less over it";
    }
    findings->push_back(
        {"straggler",
         absl::StrCat("the coordinator names rank ", s.rank, " a straggler, cause ", s.cause,
                      " (its step time stayed over --straggler_threshold above the other ranks' "
                      "median; tandem_straggler)"),
         advice});
  }
}

void CheckMemory(const Evidence& e, std::vector<Finding>* findings) {
  const WorkerTotals& w0 = e.w0();
  const double held = w0.memory[0] + w0.memory[1] + w0.memory[2] + w0.memory[3];
  if (held <= 0) return;
  Finding f{"memory",
            absl::StrFormat("each worker holds %.1f MiB for the model: parameters %.1f, "
                            "gradients %.1f, optimizer state %.1f, staging %.1f",
                            held / kMiB, w0.memory[0] / kMiB, w0.memory[1] / kMiB,
                            w0.memory[2] / kMiB, w0.memory[3] / kMiB),
            ""};
  const double available = e.o.memory_bytes_per_worker;
  if (available > 0) {
    absl::StrAppendFormat(&f.evidence, " (%.0f%% of the %.0f MiB available per worker)",
                          100 * held / available, available / kMiB);
    if (held > 0.5 * available && e.workers.size() > 1 && w0.strategy.rfind("zero", 0) != 0) {
      f.advice = "--sync zero2 shards gradients and optimizer state across the workers";
    }
  }
  findings->push_back(f);
}

// The checks, in the order their findings are listed (the kernels check
// puts its finding first).
using Check = void (*)(const Evidence&, std::vector<Finding>*);
constexpr Check kChecks[] = {CheckData,    CheckPeerWait,  CheckCommunication,
                             CheckCompute, CheckKernels,   CheckOptimizer,
                             CheckStragglers, CheckNamedStragglers, CheckMemory};

}  // namespace

absl::StatusOr<Diagnosis> Diagnose(const std::vector<ProcessMetrics>& job,
                                   const DoctorOptions& o) {
  std::vector<WorkerTotals> workers;
  DataTotals data;
  std::vector<NamedStraggler> named;
  for (const ProcessMetrics& p : job) {
    for (const PromSample& s : p.samples) {
      if (s.name != "tandem_straggler" || s.value < 0.5) continue;
      auto rank = s.labels.find("rank"), cause = s.labels.find("cause");
      if (rank != s.labels.end() && cause != s.labels.end()) {
        named.push_back({rank->second, cause->second});
      }
    }
    if (IsWorker(p)) workers.push_back(Totals(p));
    if (IsDataServer(p)) {
      ++data.servers;
      data.batches += SumOf(p.samples, "tandem_data_batches_served_total");
      data.decode_seconds += SumOf(p.samples, "tandem_data_decode_seconds_total");
      data.queue_depth += SumOf(p.samples, "tandem_data_queue_depth");
    }
  }
  if (workers.empty()) {
    return absl::FailedPreconditionError(
        "no worker metrics among the inputs (give the workers' /metrics addresses, or a run "
        "directory tandem local wrote)");
  }
  Diagnosis d;
  if (absl::Status s = AverageShares(workers, o, &d); !s.ok()) return s;
  d.verdict = Verdict(d);
  const Evidence evidence{workers, data, d, o, named};
  std::vector<Finding> findings;
  for (Check check : kChecks) check(evidence, &findings);
  d.findings = std::move(findings);
  return d;
}

std::string FormatDiagnosis(const Diagnosis& d) {
  std::string out = absl::StrFormat(
      "tandem doctor: %d worker(s), %.0f steps each, %.1f ms per step\n"
      "where step time goes (mean over workers): forward %s, backward %s, comm wait %s (wire "
      "%s), optimizer %s, data wait %s\n"
      "verdict: %s\n",
      d.workers, d.steps, d.step_ms, Pct(d.forward), Pct(d.backward), Pct(d.comm_wait),
      Pct(d.comm_wire), Pct(d.optimizer), Pct(d.data_wait), d.verdict);
  for (const Finding& f : d.findings) {
    absl::StrAppend(&out, "  ", f.kind, ": ", f.evidence, "\n");
    if (!f.advice.empty()) absl::StrAppend(&out, "    -> ", f.advice, "\n");
  }
  return out;
}

}  // namespace cli
}  // namespace tandem
