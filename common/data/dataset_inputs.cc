#include "common/data/dataset_inputs.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace data {
namespace {

std::string Describe(const v1::Tensor& spec) {
  return absl::StrCat(v1::DType_Name(spec.dtype()), " [", absl::StrJoin(spec.shape(), ","), "]");
}

}  // namespace

absl::StatusOr<DatasetInputs> ClassifyDataset(const v1::DatasetInfo& info) {
  const v1::Tensor& f = info.feature_spec();
  const v1::Tensor& l = info.label_spec();
  DatasetInputs in;
  in.num_classes = info.num_classes();
  if (f.dtype() == v1::DTYPE_I32 && f.shape_size() == 1 && l.dtype() == v1::DTYPE_I32 &&
      l.shape_size() == 1 && l.shape(0) == f.shape(0) && f.shape(0) > 0) {
    if (in.num_classes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", info.name(), ": token windows without a vocabulary size (num_classes ",
          in.num_classes, "); rewrite it with tools/convert"));
    }
    in.kind = InputKind::kTokens;
    in.context = f.shape(0);
    return in;
  }
  if ((f.dtype() == v1::DTYPE_U8 || f.dtype() == v1::DTYPE_F32) && l.dtype() == v1::DTYPE_I32 &&
      l.shape_size() == 0) {
    if (in.num_classes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", info.name(), ": class labels without a class count (num_classes ",
          in.num_classes, ")"));
    }
    in.kind = InputKind::kDense;
    in.sample_elements = 1;
    for (int64_t d : f.shape()) in.sample_elements *= d;
    in.normalize_to_f32 = f.dtype() == v1::DTYPE_U8;
    return in;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dataset ", info.name(), " has features ", Describe(f), " and labels ", Describe(l),
      "; a model can use u8/f32 features with i32 [] class labels (MLP) or i32 [ctx] tokens "
      "with i32 [ctx] next-token labels (GPT)"));
}

absl::Status CheckModelFitsDataset(const nn::ModelSpec& spec, const DatasetInputs& in) {
  // A TorchScript module is checked by running it on the samples when it is
  // built (common/torchscript).
  if (spec.kind == nn::ModelSpec::Kind::kTorchScript) return absl::OkStatus();
  if (spec.kind == nn::ModelSpec::Kind::kMlp) {
    if (in.kind != InputKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.ToString(), " is an MLP but the dataset holds token windows of ",
          in.context, "; use a gpt: model with context=", in.context, ",vocab=",
          in.num_classes));
    }
    const std::vector<int>& w = spec.mlp.widths;
    if (w.front() != in.sample_elements || w.back() != in.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.ToString(), " takes ", w.front(), " inputs and gives ", w.back(),
          " classes, but the dataset has ", in.sample_elements, " and ", in.num_classes,
          "; use mlp:", in.sample_elements, ",...,", in.num_classes));
    }
    return absl::OkStatus();
  }
  if (in.kind != InputKind::kTokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " is a GPT but the dataset holds dense samples of ",
        in.sample_elements, " elements; use an mlp: model or a token dataset"));
  }
  if (spec.gpt.context != in.context || spec.gpt.vocab < in.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " has context ", spec.gpt.context, " and vocab ",
        spec.gpt.vocab, ", but the dataset's windows are ", in.context,
        " tokens from a vocabulary of ", in.num_classes, "; use context=", in.context,
        " and vocab >= ", in.num_classes, " (or convert the text with --seq_len=",
        spec.gpt.context, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DatasetInfo> FetchDatasetInfo(const std::vector<std::string>& servers,
                                                 const std::string& dataset,
                                                 const RetryOptions& retry) {
  if (servers.empty()) {
    return absl::InvalidArgumentError("no data server given to ask for dataset " + dataset);
  }
  absl::Status last;
  for (const std::string& server : servers) {
    auto stub = v1::DataServer::NewStub(MakeChannel({.target = server}));
    v1::ListDatasetsResponse response;
    last = CallWithRetry(retry, absl::StrCat("DataServer.ListDatasets(", server, ")"),
                         [&](grpc::ClientContext* ctx) {
                           response.Clear();
                           return stub->ListDatasets(ctx, {}, &response);
                         });
    if (!last.ok()) continue;
    std::vector<std::string> names;
    for (const v1::DatasetInfo& info : response.datasets()) {
      if (info.name() == dataset) return info;
      names.push_back(info.name());
    }
    return absl::NotFoundError(absl::StrCat("data server ", server, " has no dataset '", dataset,
                                            "'; it serves: ", absl::StrJoin(names, ", ")));
  }
  return last;
}

}  // namespace data
}  // namespace tandem
