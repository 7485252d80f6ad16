#include "services/worker/dataset_probe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace worker {
namespace {

int64_t Elements(const v1::Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<InputSpec> MatchDataset(const v1::DatasetInfo& d, const nn::ModelSpec& spec,
                                       const std::string& model) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model, "' does not fit dataset '", d.name(), "': ", why));
  };
  if (d.label_spec().dtype() != v1::DTYPE_I32) return bad("its labels are not int32");
  InputSpec in;
  if (spec.kind == nn::ModelSpec::Kind::kGpt) {
    const int64_t ctx = spec.gpt.context;
    if (d.feature_spec().dtype() != v1::DTYPE_I32) {
      return bad("a GPT needs int32 token sequences (convert text with tools/convert)");
    }
    if (Elements(d.feature_spec()) != ctx || Elements(d.label_spec()) != ctx) {
      return bad(absl::StrCat("its samples hold ", Elements(d.feature_spec()),
                              " tokens, the model's context is ", ctx,
                              ": set ctx=", Elements(d.feature_spec()),
                              " or convert the text with that context"));
    }
    if (d.num_classes() > spec.gpt.vocab) {
      return bad(absl::StrCat("its vocabulary has ", d.num_classes(), " tokens, the model's ",
                              spec.gpt.vocab, ": set vocab=", d.num_classes()));
    }
    in.kind = InputSpec::Kind::kTokens;
    in.width = ctx;
    in.labels_per_sample = ctx;
    return in;
  }
  const int64_t width = Elements(d.feature_spec());
  const int inputs = spec.mlp.widths.front();
  const int classes = spec.mlp.widths.back();
  if (d.feature_spec().dtype() == v1::DTYPE_I32) {
    return bad("its samples are token sequences: use a gpt:... model");
  }
  if (width != inputs) {
    return bad(absl::StrCat("the model takes ", inputs, " inputs, the dataset has ", width,
                            " features per sample: make the first width ", width));
  }
  if (d.num_classes() > classes) {
    return bad(absl::StrCat("the model has ", classes, " classes, the dataset ",
                            d.num_classes(), ": make the last width ", d.num_classes()));
  }
  if (Elements(d.label_spec()) != 1) return bad("it has more than one label per sample");
  in.kind = InputSpec::Kind::kFeatures;
  in.width = width;
  in.labels_per_sample = 1;
  return in;
}

absl::StatusOr<DatasetProbe> ProbeDatasets(const ProbeOptions& o, const nn::ModelSpec& spec,
                                           const std::string& model) {
  v1::ListDatasetsResponse list;
  absl::Status last = absl::InvalidArgumentError("no data servers given");
  // Any data server will do; they serve the same datasets.
  for (const std::string& server : o.data_servers) {
    auto stub = v1::DataServer::NewStub(MakeChannel({.target = server}));
    RetryOptions retry;
    retry.max_attempts = o.connect_attempts;
    retry.call_timeout = absl::Seconds(5);
    retry.wait_for_ready = false;  // a refused connection fails the attempt at once
    last = CallWithRetry(retry, absl::StrCat("DataServer.ListDatasets at ", server),
                         [&](grpc::ClientContext* ctx) {
                           return stub->ListDatasets(ctx, v1::ListDatasetsRequest(), &list);
                         });
    if (last.ok()) break;
  }
  if (!last.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach a data server (",
                                               absl::StrJoin(o.data_servers, ", "),
                                               "): ", last.message()));
  }
  std::vector<std::string> names;
  const v1::DatasetInfo* train = nullptr;
  const v1::DatasetInfo* eval = nullptr;
  for (const v1::DatasetInfo& d : list.datasets()) {
    names.push_back(d.name());
    if (d.name() == o.dataset) train = &d;
    if (d.name() == o.eval_dataset) eval = &d;
  }
  const std::string known = absl::StrJoin(names, ", ");
  if (train == nullptr) {
    return absl::NotFoundError(absl::StrCat("dataset '", o.dataset,
                                            "' is not served; the data servers have: ", known));
  }
  if (!o.eval_dataset.empty() && eval == nullptr) {
    return absl::NotFoundError(absl::StrCat("eval dataset '", o.eval_dataset,
                                            "' is not served; the data servers have: ", known));
  }
  DatasetProbe p;
  ASSIGN_OR_RETURN(p.inputs, MatchDataset(*train, spec, model));
  if (eval != nullptr) {
    ASSIGN_OR_RETURN(InputSpec e, MatchDataset(*eval, spec, model));
    if (e.kind != p.inputs.kind || e.width != p.inputs.width) {
      return absl::InvalidArgumentError(absl::StrCat("eval dataset '", o.eval_dataset,
                                                     "' has other samples than '", o.dataset,
                                                     "'"));
    }
    p.eval_samples = eval->num_samples();
  }
  p.train_samples = train->num_samples();
  return p;
}

}  // namespace worker
}  // namespace tandem
