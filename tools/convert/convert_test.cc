#include "tools/convert/convert.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/data/idx.h"
#include "gtest/gtest.h"
#include "common/data/dataset.h"

namespace tandem {
namespace convert {
namespace {

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(p.c_str(), 0755);
  return p;
}

void ExpectSameSamples(const data::Dataset& a, const data::Dataset& b) {
  ASSERT_EQ(a.num_samples(), b.num_samples());
  ASSERT_EQ(a.feature_bytes(), b.feature_bytes());
  ASSERT_EQ(a.label_bytes(), b.label_bytes());
  EXPECT_EQ(a.info().feature_spec().SerializeAsString(),
            b.info().feature_spec().SerializeAsString());
  EXPECT_EQ(a.info().num_classes(), b.info().num_classes());
  std::vector<uint8_t> fa(a.feature_bytes()), fb(a.feature_bytes());
  std::vector<uint8_t> la(a.label_bytes()), lb(a.label_bytes());
  for (int64_t i = 0; i < a.num_samples(); ++i) {
    ASSERT_TRUE(a.ReadSample(i, fa.data(), la.data()).ok());
    ASSERT_TRUE(b.ReadSample(i, fb.data(), lb.data()).ok());
    ASSERT_EQ(fa, fb) << "sample " << i;
    ASSERT_EQ(la, lb) << "sample " << i;
  }
}

TEST(ConvertTest, IdxToShardsServesTheSameSamples) {
  const std::string dir = TmpDir("idx");
  data::IdxArray images, labels;
  images.dims = {25, 4, 4};
  labels.dims = {25};
  for (int i = 0; i < 25 * 16; ++i) images.data.push_back(i * 13 % 256);
  for (int i = 0; i < 25; ++i) labels.data.push_back(i % 10);
  ASSERT_TRUE(data::WriteIdxFile(dir + "/x-images-idx3-ubyte.gz", images).ok());
  ASSERT_TRUE(data::WriteIdxFile(dir + "/x-labels-idx1-ubyte.gz", labels).ok());
  const std::string out = TmpDir("idx_out");
  auto r = IdxToShards(dir + "/x-images-idx3-ubyte.gz",
                       dir + "/x-labels-idx1-ubyte.gz",
                       {.out_dir = out, .name = "x", .records_per_shard = 10});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records, 25);
  ASSERT_EQ(r->files.size(), 3u);
  EXPECT_TRUE(absl::EndsWith(r->files[2], "/x-00002-of-00003.tshard"));
  auto idx = data::OpenDataset("x", dir + "/x");
  auto shards = data::OpenDataset("x", out);
  ASSERT_TRUE(idx.ok() && shards.ok()) << shards.status();
  ExpectSameSamples(**idx, **shards);
}

TEST(ConvertTest, FashionMnistTestSetWhenInstalled) {
  const std::string fm = "/usr/share/datasets/fashion-mnist/t10k";
  auto idx = data::OpenDataset("fm", fm);
  if (absl::IsNotFound(idx.status())) GTEST_SKIP() << idx.status();
  ASSERT_TRUE(idx.ok()) << idx.status();
  const std::string out = TmpDir("fm_out");
  auto r = IdxToShards(fm + "-images-idx3-ubyte.gz", fm + "-labels-idx1-ubyte.gz",
                       {.out_dir = out, .name = "t10k", .records_per_shard = 4000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->files.size(), 3u);
  auto shards = data::OpenDataset("fm", out);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ((*shards)->num_samples(), 10000);
  ExpectSameSamples(**idx, **shards);
}

TEST(ConvertTest, TokensBecomeShiftedWindows) {
  const std::string dir = TmpDir("tok");
  std::vector<uint16_t> toks(23);
  for (int i = 0; i < 23; ++i) toks[i] = static_cast<uint16_t>(1000 + i);
  std::ofstream(dir + "/t.u16", std::ios::binary)
      .write(reinterpret_cast<const char*>(toks.data()), toks.size() * 2);
  const std::string out = TmpDir("tok_out");
  // seq_len 4: windows of 5 tokens -> 4 samples, 3 tokens dropped.
  auto r = TokensToShards(dir + "/t.u16", TokenType::kU16, 4,
                          {.out_dir = out, .name = "lm"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records, 4);
  EXPECT_EQ(r->dropped_tokens, 3);
  auto ds = data::OpenDataset("lm", out);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->info().feature_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ((*ds)->info().label_spec().shape(0), 4);
  int32_t f[4], l[4];
  ASSERT_TRUE((*ds)->ReadSample(2, reinterpret_cast<uint8_t*>(f),
                                reinterpret_cast<uint8_t*>(l)).ok());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(f[k], 1000 + 10 + k);
    EXPECT_EQ(l[k], 1000 + 11 + k);
  }
}

TEST(ConvertTest, BadTokenInputs) {
  const std::string dir = TmpDir("badtok");
  std::ofstream(dir + "/odd.i32", std::ios::binary).write("abcdefg", 7);
  auto r = TokensToShards(dir + "/odd.i32", TokenType::kI32, 1,
                          {.out_dir = dir});
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "offset 4")) << r.status();
  EXPECT_TRUE(absl::IsNotFound(
      TokensToShards(dir + "/none", TokenType::kI32, 1, {.out_dir = dir}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      TokensToShards(dir + "/odd.i32", TokenType::kI32, 0, {.out_dir = dir}).status()));
}

// Reads every record of a text dataset back as one byte string per window
// (features) and checks labels are the features shifted by one.
std::vector<std::string> ReadWindows(const data::Dataset& ds, int seq_len) {
  std::vector<std::string> out;
  std::vector<int32_t> f(seq_len), l(seq_len);
  for (int64_t i = 0; i < ds.num_samples(); ++i) {
    EXPECT_TRUE(ds.ReadSample(i, reinterpret_cast<uint8_t*>(f.data()),
                              reinterpret_cast<uint8_t*>(l.data())).ok());
    std::string w;
    for (int k = 0; k < seq_len; ++k) {
      EXPECT_GE(f[k], 0);
      EXPECT_LT(f[k], kByteVocab);
      if (k + 1 < seq_len) {
        EXPECT_EQ(l[k], f[k + 1]) << "sample " << i << " pos " << k;
      }
      w.push_back(static_cast<char>(f[k]));
    }
    w.push_back(static_cast<char>(l[seq_len - 1]));
    out.push_back(w);
  }
  return out;
}

TEST(ConvertTest, TextBecomesByteWindowsSplitIntoTrainAndEval) {
  const std::string dir = TmpDir("text");
  // Two files, concatenated in order; bytes >= 128 stay tokens 128..255.
  const std::string a = "hello world\n";                 // 12 bytes
  const std::string b = std::string("caf\xc3\xa9 \xff\x01", 8) + "tail of text.";  // 21
  std::ofstream(dir + "/a.txt", std::ios::binary) << a;
  std::ofstream(dir + "/b.txt", std::ios::binary) << b;
  const std::string all = a + b;  // 33 bytes -> 6 windows of 5, 3 dropped
  TextOptions o;
  o.seq_len = 4;
  o.eval_fraction = 0.34;  // round(6 * 0.34) = 2 eval windows
  auto r = TextToShards({dir + "/a.txt", dir + "/b.txt"}, o,
                        {.out_dir = TmpDir("text_train"), .name = "t", .records_per_shard = 3},
                        {.out_dir = TmpDir("text_eval"), .name = "t"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, 33);
  EXPECT_EQ(r->train.records, 4);
  EXPECT_EQ(r->train.files.size(), 2u);
  EXPECT_EQ(r->eval.records, 2);
  EXPECT_EQ(r->train.dropped_tokens, 3);
  auto train = data::OpenDataset("t/train", TmpDir("text_train"));
  auto eval = data::OpenDataset("t/eval", TmpDir("text_eval"));
  ASSERT_TRUE(train.ok() && eval.ok()) << train.status() << eval.status();
  for (const auto* ds : {&**train, &**eval}) {
    EXPECT_EQ(ds->info().feature_spec().dtype(), v1::DTYPE_I32);
    EXPECT_EQ(ds->info().label_spec().dtype(), v1::DTYPE_I32);
    ASSERT_EQ(ds->info().feature_spec().shape_size(), 1);
    EXPECT_EQ(ds->info().feature_spec().shape(0), 4);
    ASSERT_EQ(ds->info().label_spec().shape_size(), 1);
    EXPECT_EQ(ds->info().label_spec().shape(0), 4);
    EXPECT_EQ(ds->info().num_classes(), 256);  // the byte vocabulary, not the bytes seen
  }
  std::vector<std::string> windows = ReadWindows(**train, 4);
  for (const std::string& w : ReadWindows(**eval, 4)) windows.push_back(w);
  ASSERT_EQ(windows.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(windows[i], all.substr(5 * i, 5)) << "window " << i;
  // High bytes come through unsigned: window 3 is bytes 15..19, "\xc3\xa9 \xff\x01".
  int32_t f[4], l[4];
  ASSERT_TRUE((*train)->ReadSample(3, reinterpret_cast<uint8_t*>(f),
                                   reinterpret_cast<uint8_t*>(l)).ok());
  EXPECT_EQ(f[0], 0xc3);
  EXPECT_EQ(f[1], 0xa9);
  EXPECT_EQ(f[3], 0xff);
  EXPECT_EQ(l[3], 0x01);
}

TEST(ConvertTest, BadTextInputs) {
  const std::string dir = TmpDir("badtext");
  std::ofstream(dir + "/short.txt") << "abcdefghij";  // 10 bytes
  const ShardOutput tr{.out_dir = TmpDir("badtext_tr")}, ev{.out_dir = TmpDir("badtext_ev")};
  TextOptions o;
  o.seq_len = 4;  // 2 windows: 1 train + 1 eval is fine
  EXPECT_TRUE(TextToShards({dir + "/short.txt"}, o, tr, ev).ok());
  o.seq_len = 5;  // 1 window: no room for both
  auto r = TextToShards({dir + "/short.txt"}, o, tr, ev);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "shorter seq_len")) << r.status();
  o.seq_len = 4;
  for (double bad : {0.0, 1.0, -0.5}) {
    o.eval_fraction = bad;
    EXPECT_TRUE(absl::IsInvalidArgument(TextToShards({dir + "/short.txt"}, o, tr, ev).status()));
  }
  o.eval_fraction = 0.05;
  EXPECT_TRUE(absl::IsNotFound(TextToShards({dir + "/none.txt"}, o, tr, ev).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(TextToShards({}, o, tr, ev).status()));
  r = TextToShards({dir + "/short.txt"}, o, tr, tr);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "different directories")) << r.status();
  o.seq_len = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(TextToShards({dir + "/short.txt"}, o, tr, ev).status()));
}

TEST(ConvertTest, TextFilesInSkipsIndexesLinksAndHiddenFiles) {
  const std::string dir = TmpDir("textdir");
  std::ofstream(dir + "/zeta") << "z";
  std::ofstream(dir + "/alpha") << "a";
  std::ofstream(dir + "/alpha.dat") << "binary index";
  std::ofstream(dir + "/.hidden") << "h";
  ASSERT_EQ(symlink("alpha", (dir + "/alpha.u8").c_str()), 0);
  mkdir((dir + "/sub").c_str(), 0755);
  auto files = TextFilesIn(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir + "/alpha", dir + "/zeta"}));
  EXPECT_TRUE(absl::IsNotFound(TextFilesIn(dir + "/sub").status()));
  EXPECT_TRUE(absl::IsNotFound(TextFilesIn(dir + "/missing").status()));
}

TEST(ConvertTest, FortunesWhenInstalled) {
  auto files = TextFilesIn("/usr/share/games/fortunes");
  if (absl::IsNotFound(files.status())) {
    GTEST_SKIP() << files.status() << " (tools/setup.sh installs the Debian package fortunes)";
  }
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_GE(files->size(), 3u);  // fortunes-min alone has fortunes, literature, riddles
  TextOptions o;
  o.seq_len = 128;
  auto r = TextToShards(*files, o, {.out_dir = TmpDir("fortunes_train"), .name = "fortunes"},
                        {.out_dir = TmpDir("fortunes_eval"), .name = "fortunes"});
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t windows = r->train.records + r->eval.records;
  EXPECT_EQ(windows, r->bytes / 129);
  EXPECT_NEAR(static_cast<double>(r->eval.records) / windows, 0.05, 0.001);
  EXPECT_GT(r->train.records, 1000);
}

TEST(ConvertTest, Synthetic) {
  const std::string out = TmpDir("syn");
  auto r = SyntheticShards(20, 1000, 3, {.out_dir = out, .name = "s",
                                         .records_per_shard = 8});
  ASSERT_TRUE(r.ok()) << r.status();
  auto ds = data::OpenDataset("s", out);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_samples(), 20);
  EXPECT_EQ((*ds)->feature_bytes(), 1000);
}

}  // namespace
}  // namespace convert
}  // namespace tandem
