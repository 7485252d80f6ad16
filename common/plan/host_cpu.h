// HostCpu: the CPU floor of a step on one host — the CPU seconds every
// process of a job simulated on this machine (one_host, a CPU profile)
// spends per step, which over the cores the job gets (cores x
// Cluster::cpu_share) bounds the step from below. Internal to common/plan
// (a source of the strategy_cost target, like strategy_terms.h: it needs
// strategy_cost.cc's step model, which it is given as `step`).
//
//   RETURN_IF_ERROR(HostCpu(terms, on_servers, [&](const Terms& t) { return StepOf(r, t, s); },
//                           &prediction));
//   prediction.cpu_floor_s = prediction.host_cpu_s / terms.host_cores;
//
// What it models. Per worker: its compute, codec and memory passes at one
// core's rates (summed, not overlapped: the step with the links and every
// latency free, at the rates undivided by the share of the cores), plus
// the profile's CPU per ring round (Terms::round_cpu_s: measured on real
// jobs where the profile has job_round_cpu_s, else the bare rings' least)
// per round of its gradient collectives it takes part in (the step vote's
// tiny rounds are in step_cpu_s), plus Terms::call_cpu_s (worker and server ends together)
// per chunk it pushes and pulls, plus Terms::step_cpu_s (the rest of a
// worker's step: its data fetch, the trainer's loop, metrics); per shard
// server (ps, hybrid: `on_servers`) its optimizer step. The rounds and
// calls are counted from the strategy's own formulas: the step with every
// round, or call, costing 1 s and all else free.
//
// Thread-safe (a pure function of its arguments); fails only where `step`
// does, with its status.
#ifndef TANDEM_COMMON_PLAN_HOST_CPU_H_
#define TANDEM_COMMON_PLAN_HOST_CPU_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/strategy_cost.h"
#include "common/plan/strategy_terms.h"

namespace tandem {
namespace plan {

// The prediction of one strategy's step under the rates given.
using StepUnder = std::function<absl::StatusOr<Prediction>(const Terms&)>;

// Fills p's host_cpu_s and its parts (worker_work_s, worker_rounds,
// worker_calls, round_cpu_s, server_cpu_s) for the terms `t` (Predict's).
absl::Status HostCpu(const Terms& t, bool on_servers, const StepUnder& step, Prediction* p);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_HOST_CPU_H_
