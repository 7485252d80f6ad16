// The worker's parts that have logic of their own, without a cluster: the
// dataset/model match, the batch stager and the training plan.
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "common/kernels/cpu_backend.h"
#include "common/sync/registry.h"
#include "gtest/gtest.h"
#include "services/worker/batch_stager.h"
#include "services/worker/dataset_probe.h"
#include "services/worker/trainer_options.h"
#include "services/worker/training_plan.h"

namespace tandem {
namespace worker {
namespace {

v1::DatasetInfo Info(v1::DType features, std::vector<int64_t> shape, int64_t label_elems,
                     int classes) {
  v1::DatasetInfo d;
  d.set_name("set");
  d.set_num_samples(1000);
  d.mutable_feature_spec()->set_dtype(features);
  for (int64_t s : shape) d.mutable_feature_spec()->add_shape(s);
  d.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  if (label_elems > 1) d.mutable_label_spec()->add_shape(label_elems);
  d.set_num_classes(classes);
  return d;
}

nn::ModelSpec Spec(const std::string& s) { return *nn::ParseModelSpec(s); }

TEST(MatchDatasetTest, MlpNeedsItsInputWidthAndEnoughClasses) {
  const v1::DatasetInfo images = Info(v1::DTYPE_U8, {28, 28}, 1, 10);
  auto ok = MatchDataset(images, Spec("mlp:784,32,10"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->kind, InputSpec::Kind::kFeatures);
  EXPECT_EQ(ok->width, 784);
  EXPECT_TRUE(ok->normalize_to_f32);  // u8 pixels are asked for as f32
  auto narrow = MatchDataset(images, Spec("mlp:100,10"));
  EXPECT_TRUE(absl::IsInvalidArgument(narrow.status()));
  EXPECT_TRUE(absl::StrContains(narrow.status().message(), "use mlp:784,...,10"))
      << narrow.status();
  auto few = MatchDataset(images, Spec("mlp:784,5"));
  EXPECT_TRUE(absl::StrContains(few.status().message(), "use mlp:784,...,10")) << few.status();
}

TEST(MatchDatasetTest, GptNeedsTokenSequencesOfItsContext) {
  const std::string m = "gpt:layers=1,heads=1,d=8,ctx=16";
  const v1::DatasetInfo text = Info(v1::DTYPE_I32, {16}, 16, 256);
  auto ok = MatchDataset(text, Spec(m));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->kind, InputSpec::Kind::kTokens);
  EXPECT_EQ(ok->width, 16);
  EXPECT_EQ(ok->labels_per_sample, 16);
  EXPECT_FALSE(ok->normalize_to_f32);
  auto other_ctx = MatchDataset(text, Spec("gpt:layers=1,heads=1,d=8,ctx=32"));
  EXPECT_TRUE(absl::StrContains(other_ctx.status().message(), "use context=16"))
      << other_ctx.status();
  auto images = MatchDataset(Info(v1::DTYPE_U8, {28, 28}, 1, 10), Spec(m));
  EXPECT_TRUE(absl::StrContains(images.status().message(), "is a GPT but the dataset holds dense"))
      << images.status();
  auto tokens_to_mlp = MatchDataset(text, Spec("mlp:16,256"));
  EXPECT_TRUE(absl::StrContains(tokens_to_mlp.status().message(), "use a gpt: model"))
      << tokens_to_mlp.status();
}

data::HostBatch Batch(int n, int width, v1::DType dtype, int label_elems) {
  data::HostBatch b;
  b.feature_dtype = dtype;
  b.label_dtype = v1::DTYPE_I32;
  b.features.assign(size_t(n) * width * 4, '\1');
  b.labels.assign(size_t(n) * label_elems * 4, '\0');
  b.sample_ids.resize(n);
  return b;
}

TEST(BatchStagerTest, CpuReadsThePrefetchBuffersInPlace) {
  kernels::CpuBackend cpu;
  InputSpec in{InputSpec::Kind::kFeatures, 4, 1};
  auto s = BatchStager::Create(&cpu, in, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  data::HostBatch hb = Batch(8, 4, v1::DTYPE_F32, 1);
  auto b = (*s)->Stage(hb);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->size, 8);
  EXPECT_EQ(static_cast<const void*>(b->features), static_cast<const void*>(hb.features.data()));
  EXPECT_EQ(b->tokens, nullptr);
  EXPECT_EQ(static_cast<const void*>(b->labels), static_cast<const void*>(hb.labels.data()));
}

TEST(BatchStagerTest, TokensGoToTheTokenInput) {
  kernels::CpuBackend cpu;
  auto s = BatchStager::Create(&cpu, InputSpec{InputSpec::Kind::kTokens, 16, 16}, 4);
  ASSERT_TRUE(s.ok());
  data::HostBatch hb = Batch(3, 16, v1::DTYPE_I32, 16);
  auto b = (*s)->Stage(hb);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->features, nullptr);
  EXPECT_EQ(static_cast<const void*>(b->tokens), static_cast<const void*>(hb.features.data()));
}

TEST(BatchStagerTest, EveryBatchCarriesTheTypedView) {
  kernels::CpuBackend cpu;
  // i64 samples [2, 3]: a typed view only (no f32 features for an MLP).
  InputSpec ints{InputSpec::Kind::kFeatures, 6, 1};
  ints.dtype = v1::DTYPE_I64;
  ints.sample_shape = {2, 3};
  auto s = BatchStager::Create(&cpu, ints, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  data::HostBatch hb = Batch(3, 12, v1::DTYPE_I64, 1);  // 12 four-byte units = 6 i64
  auto b = (*s)->Stage(hb);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->inputs, static_cast<const void*>(hb.features.data()));
  EXPECT_EQ(b->inputs_dtype, nn::InputDType::kInt64);
  ASSERT_EQ(b->sample_shape.rank, 2);
  EXPECT_EQ(b->sample_shape.dims[0], 2);
  EXPECT_EQ(b->sample_shape.dims[1], 3);
  EXPECT_EQ(b->sample_shape.elements(), 6);
  EXPECT_EQ(b->label_shape.rank, 0);
  EXPECT_EQ(b->features, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument((*s)->Stage(Batch(3, 6, v1::DTYPE_F32, 1)).status()));
  // Without a typed description: f32 features / i32 tokens of shape {width}.
  auto t = BatchStager::Create(&cpu, InputSpec{InputSpec::Kind::kTokens, 16, 16}, 4);
  ASSERT_TRUE(t.ok());
  auto tb = (*t)->Stage(Batch(2, 16, v1::DTYPE_I32, 16));
  ASSERT_TRUE(tb.ok()) << tb.status();
  EXPECT_EQ(tb->inputs_dtype, nn::InputDType::kInt32);
  EXPECT_EQ(tb->sample_shape.rank, 1);
  EXPECT_EQ(tb->sample_shape.dims[0], 16);
  ASSERT_EQ(tb->label_shape.rank, 1);
  EXPECT_EQ(tb->label_shape.dims[0], 16);
  // A shape that does not hold the width is a programming error, refused.
  InputSpec wrong{InputSpec::Kind::kFeatures, 6, 1};
  wrong.sample_shape = {5};
  EXPECT_TRUE(absl::IsInvalidArgument(BatchStager::Create(&cpu, wrong, 4).status()));
}

TEST(BatchStagerTest, RefusesWrongDtypesSizesAndOversizedBatches) {
  kernels::CpuBackend cpu;
  auto s = BatchStager::Create(&cpu, InputSpec{InputSpec::Kind::kFeatures, 4, 1}, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*s)->Stage(Batch(2, 4, v1::DTYPE_U8, 1)).status()));
  data::HostBatch short_features = Batch(2, 4, v1::DTYPE_F32, 1);
  short_features.features.resize(short_features.features.size() - 4);
  EXPECT_TRUE(absl::IsDataLoss((*s)->Stage(short_features).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*s)->Stage(Batch(9, 4, v1::DTYPE_F32, 1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      BatchStager::Create(&cpu, InputSpec{InputSpec::Kind::kFeatures, 0, 1}, 8).status()));
}

TrainerOptions PlanOptions() {
  TrainerOptions o;
  o.batch_size = 10;
  o.epochs = 2;
  o.schedule = "constant";
  o.lr = 0.1;
  o.lr_scaling = "linear";
  return o;
}

TEST(TrainingPlanTest, StepsLeftScheduleAndTheCursorReCutForANewWorld) {
  TrainerOptions o = PlanOptions();
  TrainingState st;
  auto p = PlanGeneration(PlanInputs{o, 1000, 4}, &st);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->global_batch, 40);
  EXPECT_EQ(p->steps_per_epoch, 25);
  EXPECT_EQ(p->total_steps, 50);
  EXPECT_EQ(p->steps_left, 50);
  EXPECT_FLOAT_EQ(p->schedule.LearningRate(1), 0.4f);  // linear scaling x4
  // Resumed at step 10 with 450 samples of epoch 1 done, now with 3 workers:
  // batches of 30 cut from sample 450 (not a multiple of 30 x 4 = 40's
  // boundaries): 550 = 18*30 + 10, the short last kept, then 33 in epoch 2.
  TrainingState resumed;
  resumed.step = 10;
  resumed.cursor = data::Cursor{0, 0};
  resumed.samples_in_epoch = 450;
  auto q = PlanGeneration(PlanInputs{o, 1000, 3}, &resumed);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(resumed.cursor, (data::Cursor{0, 0, 450}));
  EXPECT_EQ(q->steps_per_epoch, 33);
  EXPECT_EQ(q->total_steps, 10 + 19 + 33);
  // Nothing of the epoch left to cut (2 samples for 3 ranks): the next one.
  TrainingState tail;
  tail.samples_in_epoch = 998;
  auto t = PlanGeneration(PlanInputs{o, 1000, 3}, &tail);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(tail.cursor, (data::Cursor{1, 0, 0}));
  EXPECT_EQ(tail.samples_in_epoch, 0);
  EXPECT_EQ(t->total_steps, 33);
  o.max_steps = 12;
  o.accumulation = 2;
  auto r = PlanGeneration(PlanInputs{o, 1000, 3}, &resumed);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total_steps, 12);
  EXPECT_EQ(r->steps_left, 2);
}

TEST(TrainingPlanTest, LearningRateFollowsTheScalingRuleAtEveryWorldSize) {
  for (const char* rule : {"none", "linear", "sqrt"}) {
    for (int world : {1, 2, 4}) {
      for (int64_t reference : {int64_t{0}, int64_t{20}}) {
        TrainerOptions o = PlanOptions();  // lr 0.1, batch 10, constant schedule
        o.lr_scaling = rule;
        o.lr_reference_batch = reference;
        o.warmup_steps = 4;
        TrainingState st;
        auto p = PlanGeneration(PlanInputs{o, 1000, world}, &st);
        ASSERT_TRUE(p.ok()) << p.status();
        // Factor: global batch (10 x world) over the reference (one
        // worker's 10 when 0).
        const double k = 10.0 * world / (reference == 0 ? 10 : reference);
        const double peak = std::string(rule) == "none"     ? 0.1
                            : std::string(rule) == "linear" ? 0.1 * k
                                                            : 0.1 * std::sqrt(k);
        SCOPED_TRACE(absl::StrCat(rule, " world ", world, " reference ", reference));
        EXPECT_FLOAT_EQ(p->schedule.LearningRate(2), static_cast<float>(peak * 2 / 4));  // warm-up
        EXPECT_FLOAT_EQ(p->schedule.LearningRate(10), static_cast<float>(peak));
      }
    }
  }
  TrainerOptions bad = PlanOptions();
  bad.coordinator = "127.0.0.1:1";
  bad.data_servers = {"127.0.0.1:2"};
  bad.worker_id = "w";
  EXPECT_TRUE(ValidateTrainerOptions(bad).ok()) << ValidateTrainerOptions(bad);
  bad.lr_reference_batch = -1;
  EXPECT_TRUE(absl::StrContains(ValidateTrainerOptions(bad).message(), "--lr_reference_batch"));
  bad.lr_reference_batch = 0;
  bad.replica_every = -1;
  EXPECT_TRUE(absl::StrContains(ValidateTrainerOptions(bad).message(),
                                "--replica_every must be >= 0 (0 turns peer replicas off), got -1"))
      << ValidateTrainerOptions(bad);
}

// compressed momentum_correction=1 applies --momentum in the strategy: the
// worker's optimizer must be plain sgd (no adamw, no nesterov).
TEST(TrainerOptionsTest, MomentumCorrectionNeedsSgdWithoutNesterov) {
  TrainerOptions o = PlanOptions();
  o.coordinator = "127.0.0.1:1";
  o.data_servers = {"127.0.0.1:2"};
  o.worker_id = "w";
  o.momentum = 0.9;
  absl::StatusOr<sync::SyncOptions> so =
      sync::ParseSyncOptions("compressed", "codec=topk,k=0.01,momentum_correction=1");
  ASSERT_TRUE(so.ok()) << so.status();
  o.sync = *so;
  EXPECT_TRUE(ValidateTrainerOptions(o).ok()) << ValidateTrainerOptions(o);
  TrainerOptions adamw = o;
  adamw.optimizer = "adamw";
  absl::Status s = ValidateTrainerOptions(adamw);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "needs --optimizer sgd, got --optimizer adamw")) << s;
  TrainerOptions nesterov = o;
  nesterov.nesterov = true;
  s = ValidateTrainerOptions(nesterov);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--nesterov is not supported")) << s;
  // Without momentum_correction both are fine.
  adamw.sync = *sync::ParseSyncOptions("compressed", "codec=topk,k=0.01");
  EXPECT_TRUE(ValidateTrainerOptions(adamw).ok()) << ValidateTrainerOptions(adamw);
  nesterov.sync = adamw.sync;
  EXPECT_TRUE(ValidateTrainerOptions(nesterov).ok()) << ValidateTrainerOptions(nesterov);
  // topk's default momentum correction: taken with plain sgd, given up for
  // adamw / nesterov (their own momentum stays in the optimizer).
  TrainerOptions plain = o;
  plain.sync = adamw.sync;
  EXPECT_TRUE(StrategyAppliesMomentum(plain));
  EXPECT_FALSE(StrategyAppliesMomentum(adamw));
  EXPECT_FALSE(StrategyAppliesMomentum(nesterov));
  EXPECT_TRUE(StrategyAppliesMomentum(o)) << "asked for by name";
}

TEST(TrainingPlanTest, BatchFlagsParseAndSizeTheBuffers) {
  TrainerOptions o = PlanOptions();  // batch 10
  ASSERT_TRUE(ParseBatchFlags("auto", "", &o).ok());
  EXPECT_TRUE(o.batch_auto);
  EXPECT_EQ(o.batch_min, 10);
  EXPECT_EQ(o.batch_max, 320);
  EXPECT_EQ(LocalBatchCapacity(o), 320);
  ASSERT_TRUE(ParseBatchFlags("auto:40,80", "5:60,9:30", &o).ok());
  EXPECT_EQ(o.batch_max, 80);
  EXPECT_EQ(LocalBatchCapacity(o), 80);
  EXPECT_EQ(ScheduledGlobalBatch(o, 4), 0);
  EXPECT_EQ(ScheduledGlobalBatch(o, 5), 60);
  EXPECT_EQ(ScheduledGlobalBatch(o, 8), 60);
  EXPECT_EQ(ScheduledGlobalBatch(o, 100), 30);
  ASSERT_TRUE(ParseBatchFlags("fixed", "", &o).ok());
  EXPECT_FALSE(o.batch_auto);
  EXPECT_EQ(LocalBatchCapacity(o), 10);
  for (const char* bad : {"auto:80,40", "auto:", "auto:1,2,3", "dynamic"}) {
    absl::Status s = ParseBatchFlags(bad, "", &o);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "--batch")) << s;
  }
  for (const char* bad : {"5", "0:10", "5:0", "9:10,5:20", "a:b"}) {
    absl::Status s = ParseBatchFlags("", bad, &o);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "--batch_schedule")) << s;
  }
}

TEST(TrainingPlanTest, AGlobalBatchOverrideRescalesTheLrAndIsChecked) {
  TrainerOptions o = PlanOptions();  // batch 10, lr 0.1 linear
  ASSERT_TRUE(ParseBatchFlags("", "3:60", &o).ok());
  TrainingState st;
  st.samples_in_epoch = 130;
  PlanInputs in{o, 1000, 2};
  in.global_batch = 60;
  auto p = PlanGeneration(in, &st);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->global_batch, 60);
  EXPECT_FLOAT_EQ(p->schedule.LearningRate(5), 0.6f);  // 0.1 x 60 / 10
  EXPECT_EQ(st.cursor, (data::Cursor{0, 0, 130}));
  // 870 = 14 x 60 + 30 (kept short batch), then 16 in epoch 2.
  EXPECT_EQ(p->total_steps, 15 + 16);
  in.global_batch = 1;  // fewer samples than workers
  EXPECT_TRUE(absl::IsInvalidArgument(PlanGeneration(in, &st).status()));
  in.global_batch = 200;  // 100 per worker, buffers sized for 60
  auto big = PlanGeneration(in, &st);
  EXPECT_TRUE(absl::IsInvalidArgument(big.status()));
  EXPECT_TRUE(absl::StrContains(big.status().message(), "capacity")) << big.status();
}

TEST(TrainingPlanTest, GlobalBatchLargerThanTheDatasetSaysWhatToLower) {
  TrainingState st;
  auto p = PlanGeneration(PlanInputs{PlanOptions(), 30, 4}, &st);
  EXPECT_TRUE(absl::IsInvalidArgument(p.status()));
  EXPECT_TRUE(absl::StrContains(p.status().message(), "lower --batch_size")) << p.status();
}

TEST(TrainingPlanTest, TheStreamStartsAtTheCursorWithTheRightInputs) {
  TrainerOptions o = PlanOptions();
  o.accumulation = 2;
  TrainingState st;
  st.samples_in_epoch = 80;
  auto p = PlanGeneration(PlanInputs{o, 1000, 2}, &st);
  ASSERT_TRUE(p.ok());
  data::PrefetchOptions mlp = TrainStream(o, *p, st, 1, 2, /*normalize_to_f32=*/true, nullptr);
  EXPECT_EQ(mlp.request.step_in_epoch(), 0);
  EXPECT_EQ(mlp.request.start_position(), 80);  // the exact sample, any world
  EXPECT_EQ(mlp.request.rank(), 1);
  EXPECT_EQ(mlp.request.max_batches(), p->steps_left * 2);
  EXPECT_TRUE(mlp.request.normalize_to_f32());
  data::PrefetchOptions gpt = TrainStream(o, *p, st, 0, 2, /*normalize_to_f32=*/false, nullptr);
  EXPECT_FALSE(gpt.request.normalize_to_f32());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
