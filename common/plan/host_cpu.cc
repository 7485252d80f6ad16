#include "common/plan/host_cpu.h"

#include <limits>

#include "common/status/status_macros.h"

namespace tandem {
namespace plan {

// The workers' work is the step's terms at one core's rates with the links
// and every latency free, summed; its ring rounds and shard calls are
// counted as the step with each costing 1 s and everything else free (ps /
// hybrid: the optimizer step runs on the servers, once per server).
absl::Status HostCpu(const Terms& t, bool on_servers, const StepUnder& step, Prediction* p) {
  constexpr double kFree = std::numeric_limits<double>::infinity();
  Terms base = t;
  base.round_cpu_s = base.call_cpu_s = base.step_cpu_s = 0;  // no floor inside the counts
  base.node.bytes_per_s = base.server_rate = kFree;
  if (base.intra.bytes_per_s > 0) base.intra.bytes_per_s = kFree;
  base.node.alpha_s = base.cross_alpha = base.shm_alpha = base.intra.alpha_s = 0;
  base.call_s = 0;
  Terms work = base;
  work.flops /= t.share;
  work.stream /= t.share;
  work.codec /= t.share;
  ASSIGN_OR_RETURN(Prediction w, step(work));
  Terms count = base;
  count.flops = count.stream = count.codec = kFree;
  count.node.alpha_s = count.cross_alpha = 1;
  ASSIGN_OR_RETURN(Prediction rounds, step(count));
  count.node.alpha_s = count.cross_alpha = 0;
  count.call_s = 1;
  ASSIGN_OR_RETURN(Prediction calls, step(count));
  p->worker_work_s =
      w.forward_s + w.backward_s + w.comm_s + w.finish_s - (on_servers ? w.optimizer_s : 0);
  // The step vote's rounds (tiny, latency-bound) are not gradient rounds:
  // what they cost is part of step_cpu_s, as calibrated.
  p->worker_rounds = rounds.step_s - rounds.control_s;
  p->worker_calls = calls.step_s;
  p->round_cpu_s = t.round_cpu_s;
  p->call_cpu_s = t.call_cpu_s;
  p->step_cpu_s = t.step_cpu_s;
  p->server_cpu_s = on_servers ? t.servers * w.optimizer_s : 0;
  p->host_cpu_s = t.n * (t.step_cpu_s + p->worker_work_s + p->worker_rounds * t.round_cpu_s +
                         p->worker_calls * t.call_cpu_s) +
                  p->server_cpu_s;
  return absl::OkStatus();
}

}  // namespace plan
}  // namespace tandem
