#include "common/plan/strategy_cost.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/plan/collective_cost.h"
#include "common/plan/host_cpu.h"
#include "common/plan/simulated_link.h"
#include "common/plan/strategy_terms.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_plan.h"

namespace tandem {
namespace plan {
namespace {

constexpr double kStepVoteBytes = 6 * kFloat;

struct Codec {
  double ratio = 1;    // encoded bytes / fp32 bytes
  bool sparse = false;
};

absl::StatusOr<Codec> ParseCodec(const std::string& name) {
  if (name == "int8") return Codec{(1 + 4.0 / 1024) / 4, false};  // + an fp32 scale per 1024
  if (name == "fp16" || name == "bf16") return Codec{0.5, false};
  if (absl::StartsWith(name, "topk=")) {
    double k = 0;
    if (!absl::SimpleAtod(name.substr(5), &k) || !(k > 0 && k <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressed:", name, ": the top-k fraction must be in (0, 1], e.g. topk=0.01"));
    }
    return Codec{2 * k, true};  // an int32 index and an fp32 value per kept element
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown codec '", name, "' (known: int8, fp16, bf16, topk=FRACTION)"));
}

// How one strategy moves a bucket, what it does after backward, and what
// it keeps per rank.
struct Shape {
  // Seconds for the bucket of flat elements [lo, hi).
  std::function<double(int64_t lo, int64_t hi)> bucket;
  double finish_comm_s = 0;
  double owned_elements = 0;      // stepped by this rank's optimizer
  double server_elements = 0;     // stepped by each server
  double node_link_bytes = 0;
  double server_link_bytes = 0;   // sent by each shard server (pulls, replica)
  int64_t grad_bytes = 0;
  int64_t param_bytes = -1;       // parameters held per rank; -1 = all of them
};

int64_t ShardElements(int64_t size, int world) { return (size + world - 1) / world; }

// What every rank keeps unless its strategy shards it: all the reduced
// gradients, the optimizer step over all of the parameters.
Shape Replicated(const Terms& t, int64_t flat) {
  Shape s;
  s.grad_bytes = static_cast<int64_t>(t.p_bytes);
  s.owned_elements = static_cast<double>(flat);
  return s;
}

// The flat ring: every bucket allreduced over the world.
Shape AllReduceShape(const Terms& t, int64_t flat) {
  Shape s = Replicated(t, flat);
  s.bucket = [&t](int64_t lo, int64_t hi) { return WorldAllReduce(t, (hi - lo) * kFloat); };
  s.node_link_bytes = t.m > 1 ? RingAllReduceBytes(t.n, t.p_bytes) : 0;
  return s;
}

// Reduce-scatter in the node, K concurrent rings across nodes (one per
// local rank, each on 1/K of the bucket, sharing the node's link),
// allgather in the node.
Shape HierShape(const Terms& t, int64_t flat) {
  if (t.m == 1) return AllReduceShape(t, flat);
  Shape s = Replicated(t, flat);
  s.bucket = [&t](int64_t lo, int64_t hi) {
    const double b = (hi - lo) * kFloat;
    // The K rings run at once: while one waits out a round the others
    // send, so the link is busy for all K rings' bytes or one ring's rounds
    // plus its own bytes at the full rate, whichever is longer.
    const Link full{t.cross_alpha, t.node.bytes_per_s};
    const double rings = std::max(RingAllReduceSeconds(t.m, b / t.k, full),
                                  t.k * RingAllReduceBytes(t.m, b / t.k) / t.node.bytes_per_s);
    return ShmReduceScatter(t, b) + rings + ShmAllGather(t, b);
  };
  s.node_link_bytes = t.k * RingAllReduceBytes(t.m, t.p_bytes / t.k);
  return s;
}

// zero1: allreduce, then each rank steps its 1/N and the parameters are
// allgathered. zero2: as zero_sync.cc routes a bucket — its pieces (one per
// shard) packed into N equal blocks and reduce-scattered when N * largest
// piece <= 2 * bucket, else allreduced in place (a bucket mostly in one
// shard); it keeps only its shard of the reduced gradients.
Shape ZeroShape(const Terms& t, int64_t flat, bool stage2) {
  Shape s = AllReduceShape(t, flat);
  const int64_t shard = ShardElements(flat, t.n);
  s.owned_elements = static_cast<double>(std::min(shard, flat));
  if (stage2) {
    s.bucket = [&t, shard, flat](int64_t lo, int64_t hi) {
      int64_t largest = 0;
      for (int j = 0; j < t.n; ++j) {
        const int64_t plo = std::max(lo, j * shard);
        const int64_t phi = std::min({hi, (j + 1) * shard, flat});
        largest = std::max<int64_t>(largest, phi - plo);
      }
      if (t.n > 1 && largest * t.n <= 2 * (hi - lo)) {
        return WorldReduceScatter(t, static_cast<double>(largest) * t.n * kFloat);
      }
      return WorldAllReduce(t, (hi - lo) * kFloat);
    };
    s.grad_bytes = static_cast<int64_t>(shard * kFloat);
  }
  s.finish_comm_s = WorldAllGather(t, t.p_bytes);
  // zero1: allreduce + the parameters' allgather; zero2: reduce-scatter +
  // allgather (as many bytes as one allreduce).
  const double rs = RingReduceScatterBytes(t.n, t.p_bytes);
  s.node_link_bytes = t.m > 1 ? (stage2 ? 2 * rs : RingAllReduceBytes(t.n, t.p_bytes) + rs) : 0;
  return s;
}

// zero2's reduce-scatter of the gradients; the parameters stay sharded and
// gathered group by group (zero3_sync.h): consecutive layers share one
// gather until the group holds group_mb (4 MiB; on one node every layer
// alone). Forward gathers the first group, then each next one while the
// current one computes; backward keeps forward's last group and gathers
// the others again, the one before while the current one computes. What a
// gather takes beyond the compute it overlaps is exposed (finish_comm_s).
// A rank holds 1/N of the parameters (plus the groups in flight, left out).
constexpr double kZero3GroupFloats = 4.0 * (1 << 20) / kFloat;
Shape Zero3Shape(const Terms& t, const ModelCost& model, int batch) {
  const int64_t flat = model.flat_size;
  Shape s = ZeroShape(t, flat, /*stage2=*/true);
  // Layers in forward order (the backward groups reversed), their forward
  // and backward seconds, grouped.
  struct Group { double floats = 0, forward_s = 0, backward_s = 0; };
  std::vector<Group> groups;
  const double min_floats = t.m == 1 ? 0 : kZero3GroupFloats;
  const double forward_share = model.forward_flops / std::max(1.0, model.train_flops - model.forward_flops);
  for (size_t i = model.groups_backward.size(); i-- > 0;) {
    if (groups.empty() || groups.back().floats >= min_floats) groups.push_back({});
    Group& g = groups.back();
    g.floats += model.groups_backward[i];
    g.backward_s += model.backward_flops[i] * batch / t.flops;
    g.forward_s += forward_share * model.backward_flops[i] * batch / t.flops;
  }
  if (groups.size() > 1 && groups.back().floats < min_floats) {
    Group last = groups.back();
    groups.pop_back();
    groups.back().floats += last.floats;
    groups.back().forward_s += last.forward_s;
    groups.back().backward_s += last.backward_s;
  }
  auto gather = [&t](const Group& g) { return WorldAllGather(t, g.floats * kFloat); };
  double exposed = gather(groups.front());
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    exposed += std::max(0.0, gather(groups[g + 1]) - groups[g].forward_s);
  }
  for (size_t g = groups.size() - 1; g > 0; --g) {
    exposed += std::max(0.0, gather(groups[g - 1]) - groups[g].backward_s);
  }
  s.finish_comm_s = exposed;
  // The gradients' reduce-scatter, and every group gathered twice but the
  // one backward keeps.
  const double gathered = 2 * t.p_bytes - groups.back().floats * kFloat;
  s.node_link_bytes =
      t.m > 1 ? RingReduceScatterBytes(t.n, t.p_bytes) + RingReduceScatterBytes(t.n, gathered) : 0;
  s.param_bytes = static_cast<int64_t>(std::min(ShardElements(flat, t.n), flat) * kFloat);
  return s;
}

// ps: every rank pushes each bucket to the servers; hybrid: reduce-scatter
// in the node, each local rank pushes its 1/K, and each group of K chunks
// is allgathered in the node as soon as its pulls are in. Pipelined
// (ps_sync.h, pipeline=1, the default): each chunk is pulled right behind
// its push, on the other direction of the same links, so the pulls ride
// along with the pushes and what is left after backward's last push is
// the pull of the last chunk (every rank of a node pulls one: ps the same
// chunk, hybrid one chunk of the group each) plus hybrid's landing (below).
// A chunk is chunk_mb (0.25 MiB) or, for a vector that small,
// one server's whole range: the ShardLayout cuts each server's 1/S range
// into chunks (common/shard/shard_layout.h).
constexpr double kPipelineChunkBytes = 0.25 * (1 << 20);
absl::StatusOr<Shape> RemoteShape(const std::string& strategy, const Terms& t, int64_t flat) {
  if (t.servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(strategy, " needs shard servers: give --shard_servers S (S >= 1)"));
  }
  Shape s = Replicated(t, flat);
  s.owned_elements = 0;
  s.server_elements = static_cast<double>(ShardElements(flat, t.servers));
  // The push direction carries the bucket; the pull direction the same
  // bytes at the same time (full duplex): the bucket's cost is one transfer.
  // A worker's calls for b bytes: ps pushes every chunk of them, hybrid
  // its own 1/K (at least one call either way).
  const double chunk = std::min(t.p_bytes / t.servers, kPipelineChunkBytes);
  if (strategy == "ps") {
    s.bucket = [&t, chunk](int64_t lo, int64_t hi) {
      const double b = (hi - lo) * kFloat;
      return ServerTransfer(t, b, t.k, std::max(1.0, b / chunk), b);
    };
    // The last chunk's pull; its replica's copy overlaps the next step.
    s.finish_comm_s = ServerTransfer(t, chunk, t.k, 1, 0);
    s.node_link_bytes = t.k * t.p_bytes;
    s.server_link_bytes = (t.n + (t.replicas ? 1 : 0)) * t.p_bytes / t.servers;
  } else {
    s.bucket = [&t, chunk](int64_t lo, int64_t hi) {
      const double b = (hi - lo) * kFloat;
      return ShmReduceScatter(t, b) +
             ServerTransfer(t, b / t.k, t.k, std::max(1.0, b / (t.k * chunk)), b);
    };
    // The landing (hybrid_land.cc): each group of K chunks is allgathered
    // in the node once its pulls are in, queued in the order the pulls went
    // out (backward's: the last layers first), so the next forward's first
    // layer waits for every group: the whole vector's in-node allgather is
    // exposed, one round per group.
    const double groups = std::ceil(t.p_bytes / (t.k * chunk));
    s.finish_comm_s = ServerTransfer(t, chunk, t.k, 1, 0) + ShmAllGather(t, t.p_bytes) +
                      (t.k > 1 ? (groups - 1) * t.shm_alpha : 0);
    s.node_link_bytes = t.p_bytes;
    s.server_link_bytes = (t.m + (t.replicas ? 1 : 0)) * t.p_bytes / t.servers;
  }
  return s;
}

// Sparse codecs: an allgather of every rank's (index, value) set; each
// rank decodes n sets. Dense codecs: all-to-all of compressed slices, fp32
// sum, re-compress, allgather of the compressed sums (encode B, decode B,
// encode B/n, decode B).
absl::StatusOr<Shape> CompressedShape(const std::string& codec, const Terms& t, int64_t flat) {
  ASSIGN_OR_RETURN(Codec c, ParseCodec(codec));
  Shape s = Replicated(t, flat);
  if (c.sparse) {
    s.bucket = [&t, c](int64_t lo, int64_t hi) {
      const double b = (hi - lo) * kFloat;
      return WorldAllGather(t, t.n * c.ratio * b) + (1 + t.n * c.ratio) * b / t.codec;
    };
    s.node_link_bytes = t.m > 1 ? (t.n - 1) * c.ratio * t.p_bytes : 0;
    return s;
  }
  s.bucket = [&t, c](int64_t lo, int64_t hi) {
    const double b = (hi - lo) * kFloat;
    const double wire = c.ratio * b;
    const double link = t.m == 1 ? 2 * (2 * wire / t.stream)
                                 : AllToAllSeconds(t.n, wire, t.node) +
                                       RingAllGatherSeconds(t.n, wire, t.node);
    return link + (3 + 1.0 / t.n) * b / t.codec;
  };
  s.node_link_bytes = t.m > 1 ? 2 * RingReduceScatterBytes(t.n, c.ratio * t.p_bytes) : 0;
  return s;
}

// PowerSGD at rank R (powersgd_sync.h): per bucket, one allreduce of every
// compressed weight's P (rows x R) with the bucket's other values in fp32,
// one of the Qs (cols x R); three GEMMs of 2 x rows x cols x R FLOPs per
// weight (P, Q, the reconstruction) and the residual's passes over M.
// A weight compresses when rows x cols >= 2 (rows + cols) R and it is not an
// embedding table (embeddings=0, the default: they go with the fp32 values).
absl::StatusOr<Shape> PowerSgdShape(const std::string& rank_text, const Terms& t,
                                    const ModelCost& model) {
  int rank = 0;
  if (!absl::SimpleAtoi(rank_text, &rank) || rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compressed:powersgd=", rank_text, ": the rank must be a whole number >= 1, e.g. powersgd=4"));
  }
  // Per group (buckets are made of whole groups): floats in the first and
  // second allreduce, GEMM FLOPs, elements compressed.
  struct Cost { int64_t lo, hi; double p = 0, q = 0, flops = 0, compressed = 0; };
  auto groups = std::make_shared<std::vector<Cost>>();
  int64_t lo = 0;
  for (size_t g = 0; g < model.groups_backward.size(); ++g) {
    Cost c{lo, lo + model.groups_backward[g]};
    for (const std::vector<int64_t>& shape : model.shapes_backward[g]) {
      const double rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
      if (shape.size() == 2 && rows * cols >= 2.0 * (rows + cols) * rank &&
          !(g < model.embeddings_backward.size() && model.embeddings_backward[g])) {
        c.p += rows * rank;
        c.q += cols * rank;
        c.flops += 3 * 2 * rows * cols * rank;
        c.compressed += rows * cols;
      } else {
        c.p += rows * cols;
      }
    }
    groups->push_back(c);
    lo += model.groups_backward[g];
  }
  Shape s = Replicated(t, model.flat_size);
  s.bucket = [&t, groups](int64_t lo, int64_t hi) {
    Cost sum{lo, hi};
    for (const Cost& c : *groups) {
      if (c.lo < lo || c.hi > hi) continue;
      sum.p += c.p;
      sum.q += c.q;
      sum.flops += c.flops;
      sum.compressed += c.compressed;
    }
    // The residual: read M, write M - P Q^T / W, read it back next step.
    return WorldAllReduce(t, sum.p * kFloat) + WorldAllReduce(t, sum.q * kFloat) +
           sum.flops / t.flops + 3 * sum.compressed * kFloat / t.stream;
  };
  double wire = 0;
  for (const Cost& c : *groups) wire += (c.p + c.q) * kFloat;
  s.node_link_bytes = t.m > 1 ? RingAllReduceBytes(t.n, wire) : 0;
  return s;
}

absl::StatusOr<Shape> ShapeOf(const std::string& strategy, const Terms& t,
                              const ModelCost& model, int batch) {
  const int64_t flat = model.flat_size;
  constexpr absl::string_view kPowerSgd = "compressed:powersgd=";
  if (absl::StartsWith(strategy, kPowerSgd)) {
    return PowerSgdShape(strategy.substr(kPowerSgd.size()), t, model);
  }
  if (strategy == "allreduce") return AllReduceShape(t, flat);
  if (strategy == "hier") return HierShape(t, flat);
  if (strategy == "zero1" || strategy == "zero2") return ZeroShape(t, flat, strategy == "zero2");
  if (strategy == "zero3") return Zero3Shape(t, model, batch);
  if (strategy == "ps" || strategy == "hybrid") return RemoteShape(strategy, t, flat);
  constexpr absl::string_view kCompressed = "compressed:";
  if (absl::StartsWith(strategy, kCompressed)) {
    return CompressedShape(strategy.substr(kCompressed.size()), t, flat);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown strategy '", strategy, "' (known: allreduce, hier, zero1, zero2, zero3, ps, hybrid, ",
      "compressed:int8, compressed:fp16, compressed:bf16, compressed:topk=F, "
      "compressed:powersgd=R)"));
}

// Optimizer state floats per element and bytes streamed per element stepped.
std::pair<int, double> OptimizerCost(const PlanRequest& r) {
  if (r.optimizer == "adamw") return {2, 7 * kFloat};  // read p g m v, write p m v
  if (r.momentum != 0) return {1, 5 * kFloat};        // read p g m, write p m
  return {0, 3 * kFloat};
}

absl::Status Validate(const PlanRequest& r) {
  RETURN_IF_ERROR(ValidateCluster(r.cluster));
  if (r.batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch must be at least 1, got ", r.batch));
  }
  if (r.optimizer != "sgd" && r.optimizer != "adamw") {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer must be sgd or adamw, got '", r.optimizer, "'"));
  }
  if (!(r.bucket_cap_mb > 0)) {
    return absl::InvalidArgumentError("bucket_cap_mb must be positive");
  }
  if (r.model.flat_size <= 0 || r.model.groups_backward.empty()) {
    return absl::InvalidArgumentError("the model has no parameters");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> BucketCount(const ModelCost& model, double bucket_cap_mb) {
  if (!(bucket_cap_mb > 0)) return absl::InvalidArgumentError("bucket_cap_mb must be positive");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t lo = 0;
  for (int64_t g : model.groups_backward) {
    ranges.push_back({lo, lo + g});
    lo += g;
  }
  ASSIGN_OR_RETURN(sync::BucketPlan plan,
                   sync::PlanBuckets(ranges, model.flat_size,
                                     static_cast<int64_t>(bucket_cap_mb * (1 << 20))));
  return static_cast<int>(plan.buckets.size());
}

std::vector<std::string> PlannedStrategies(const Cluster& cluster) {
  std::vector<std::string> s = {"allreduce"};
  if (cluster.nodes > 1) s.push_back("hier");
  if (cluster.ranks() > 1) {
    s.push_back("zero1");
    s.push_back("zero2");
    s.push_back("zero3");
  }
  if (cluster.servers > 0) {
    s.push_back("ps");
    s.push_back("hybrid");
  }
  if (cluster.ranks() > 1) {
    s.push_back("compressed:int8");
    s.push_back("compressed:fp16");
    s.push_back("compressed:topk=0.01");
    s.push_back("compressed:powersgd=4");
  }
  return s;
}

namespace {

// Backward, and the buckets' collectives overlapped with it: fills
// backward_s, comm_s and exposed_comm_s. Buckets exactly as the strategies
// plan them, from the model's ranges; range i is ready after the FLOPs of
// ranges [0, i]; one collective at a time, in plan order.
absl::Status Timeline(const PlanRequest& r, const Terms& t, const Shape& shape, Prediction* p) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t lo = 0;
  for (int64_t g : r.model.groups_backward) {
    ranges.push_back({lo, lo + g});
    lo += g;
  }
  ASSIGN_OR_RETURN(sync::BucketPlan plan,
                   sync::PlanBuckets(ranges, r.model.flat_size,
                                     static_cast<int64_t>(r.bucket_cap_mb * (1 << 20))));
  std::vector<double> done_at(ranges.size());
  double elapsed = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    elapsed += r.model.backward_flops[i] * r.batch / t.flops;
    done_at[i] = elapsed;
  }
  p->backward_s = elapsed;
  double comm_free = 0;
  for (const sync::Bucket& b : plan.buckets) {
    const double cost = shape.bucket(b.lo, b.hi);
    p->comm_s += cost;
    comm_free = std::max(comm_free, done_at[b.end_range - 1]) + cost;
  }
  p->exposed_comm_s = std::max(0.0, comm_free - p->backward_s);
  return absl::OkStatus();
}

// The largest term names the bottleneck, with the numbers behind it.
void NameBottleneck(const Terms& t, const Shape& shape, double optimizer_s, Prediction* p) {
  const double compute = p->forward_s + p->backward_s;
  const double comm = p->exposed_comm_s + shape.finish_comm_s;
  std::string where = "node link";
  if (t.m == 1) where = t.intra.bytes_per_s > 0 ? "intra-node link" : "memory bandwidth";
  if (shape.server_elements > 0 && t.servers * t.server_rate < t.m * t.node.bytes_per_s) {
    where = "server links";
  }
  if (compute >= comm && compute >= optimizer_s) {
    p->bottleneck = "compute";
    p->why = absl::StrFormat("forward + backward %.1f ms of a %.1f ms step (%.0f%%)",
                             compute * 1e3, p->step_s * 1e3, 100 * compute / p->step_s);
  } else if (comm >= optimizer_s) {
    p->bottleneck = where;
    p->why = absl::StrFormat(
        "communication not hidden by backward %.1f ms of a %.1f ms step (%.0f%%)", comm * 1e3,
        p->step_s * 1e3, 100 * comm / p->step_s);
  } else {
    p->bottleneck = "memory bandwidth";
    p->why = absl::StrFormat("optimizer %.1f ms of a %.1f ms step", optimizer_s * 1e3,
                             p->step_s * 1e3);
  }
}

// The prediction with the rates `t` (Predict's, or one with a part made free).
absl::StatusOr<Prediction> StepOf(const PlanRequest& r, const Terms& t,
                                  const std::string& strategy) {
  ASSIGN_OR_RETURN(Shape shape, ShapeOf(strategy, t, r.model, r.batch));

  Prediction p;
  p.strategy = strategy;
  p.lossy = absl::StartsWith(strategy, "compressed:");
  p.forward_s = r.model.forward_flops * r.batch / t.flops;
  RETURN_IF_ERROR(Timeline(r, t, shape, &p));

  const auto [state_floats, stream_per_element] = OptimizerCost(r);
  const double optimizer_s =
      std::max(shape.owned_elements, shape.server_elements) * stream_per_element / t.stream;
  // Every step ends with the workers' step vote (services/worker/
  // step_vote.cc): a 6-float allreduce over the world, latency-bound.
  p.control_s = t.n > 1 ? WorldAllReduce(t, kStepVoteBytes) : 0;
  p.optimizer_s = optimizer_s;
  p.finish_s = optimizer_s + shape.finish_comm_s + p.control_s;
  const double nominal = p.forward_s + p.backward_s + p.exposed_comm_s + p.finish_s;
  if (r.cluster.one_host) {
    p.burst_saved_s = SimulatedBurstSavedSeconds(
        nominal, {shape.node_link_bytes / t.node.bytes_per_s, shape.server_link_bytes / t.server_rate},
        r.cluster.link_bits_per_s);
  }
  p.step_s = nominal - p.burst_saved_s;
  if (t.round_cpu_s > 0 || t.call_cpu_s > 0 || t.step_cpu_s > 0) {
    RETURN_IF_ERROR(HostCpu(
        t, strategy == "ps" || strategy == "hybrid",
        [&r, &strategy](const Terms& under) { return StepOf(r, under, strategy); }, &p));
    p.cpu_floor_s = p.host_cpu_s / t.host_cores;
    p.step_s = std::max(p.step_s, p.cpu_floor_s);
  }
  p.samples_per_s = t.n * r.batch / p.step_s;
  p.node_link_bytes = shape.node_link_bytes;

  p.param_bytes = shape.param_bytes >= 0 ? shape.param_bytes : static_cast<int64_t>(t.p_bytes);
  p.grad_bytes = shape.grad_bytes;
  p.optimizer_bytes = static_cast<int64_t>(state_floats * shape.owned_elements * kFloat);
  p.activation_bytes = static_cast<int64_t>(r.model.activation_floats * r.batch * kFloat);
  p.server_bytes = static_cast<int64_t>((1 + state_floats) * shape.server_elements * kFloat);
  const double limit = r.machine.memory_bytes_per_rank;
  p.fits = limit == 0 || static_cast<double>(p.total_bytes()) <= limit;
  NameBottleneck(t, shape, optimizer_s, &p);
  return p;
}

// What bounds the step: the seconds it would lose if each part cost
// nothing — the links' bytes (rates infinite), the CPU (compute, codec and
// memory passes, the shard calls' CPU) or the latency (every round's
// alpha: ring rounds, the step vote, shared-memory barriers).
absl::Status Bounds(const PlanRequest& r, const Terms& t, Prediction* p) {
  constexpr double kFree = std::numeric_limits<double>::infinity();
  Terms link = t, cpu = t, latency = t;
  link.node.bytes_per_s = link.server_rate = kFree;
  if (link.intra.bytes_per_s > 0) link.intra.bytes_per_s = kFree;
  cpu.flops = cpu.stream = cpu.codec = kFree;
  cpu.call_s = cpu.round_cpu_s = cpu.call_cpu_s = cpu.step_cpu_s = 0;
  latency.node.alpha_s = latency.cross_alpha = latency.shm_alpha = latency.intra.alpha_s = 0;
  const std::pair<const Terms*, double*> parts[] = {
      {&link, &p->link_bound_s}, {&cpu, &p->cpu_bound_s}, {&latency, &p->latency_bound_s}};
  for (const auto& [terms, out] : parts) {
    ASSIGN_OR_RETURN(Prediction free, StepOf(r, *terms, p->strategy));
    *out = std::max(0.0, p->step_s - free.step_s);
  }
  const bool device = r.machine.per_rank_device();
  p->bound = "link";
  if (p->cpu_bound_s > p->link_bound_s) p->bound = device ? "compute" : "CPU";
  if (p->latency_bound_s > std::max(p->link_bound_s, p->cpu_bound_s)) p->bound = "latency";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Prediction> Predict(const PlanRequest& r, const std::string& strategy) {
  RETURN_IF_ERROR(Validate(r));
  const Terms t = TermsOf(r, strategy == "ps" || strategy == "hybrid");
  ASSIGN_OR_RETURN(Prediction p, StepOf(r, t, strategy));
  RETURN_IF_ERROR(Bounds(r, t, &p));
  return p;
}

absl::StatusOr<std::vector<Prediction>> PredictAll(const PlanRequest& r) {
  std::vector<Prediction> all;
  for (const std::string& s : PlannedStrategies(r.cluster)) {
    ASSIGN_OR_RETURN(Prediction p, Predict(r, s));
    all.push_back(std::move(p));
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Prediction& a, const Prediction& b) { return a.step_s < b.step_s; });
  return all;
}

}  // namespace plan
}  // namespace tandem
