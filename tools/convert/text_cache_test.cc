#include "tools/convert/text_cache.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
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

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

std::string WriteText(const std::string& path, int bytes) {
  std::string text;
  for (int i = 0; i < bytes; ++i) text.push_back("the quick brown fox\n"[i % 20]);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TextCacheOptions Options(const std::string& src, const std::string& root, int seq_len) {
  TextCacheOptions o;
  o.sources = {src};
  o.cache_root = root;
  o.name = "fortunes";
  o.text.seq_len = seq_len;
  return o;
}

TEST(TextCacheTest, ConvertsOnceThenReuses) {
  const std::string src = WriteText(TmpDir("once") + "/text", 2000);
  const std::string root = TmpDir("once") + "/cache/nested";  // parents created
  auto first = EnsureTextDataset(Options(src, root, 16));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->converted);
  EXPECT_TRUE(absl::StartsWith(first->dir, root + "/fortunes-ctx16-")) << first->dir;
  auto train = data::OpenDataset("fortunes/train", first->train_dir);
  auto eval = data::OpenDataset("fortunes/eval", first->eval_dir);
  ASSERT_TRUE(train.ok() && eval.ok()) << train.status() << eval.status();
  EXPECT_EQ((*train)->num_samples() + (*eval)->num_samples(), 2000 / 17);
  EXPECT_EQ((*train)->info().feature_spec().shape(0), 16);

  auto again = EnsureTextDataset(Options(src, root, 16));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->converted);
  EXPECT_EQ(again->dir, first->dir);
  // Only the one entry: no temporary directory was left behind.
  EXPECT_EQ(Entries(root).size(), 1u);
}

TEST(TextCacheTest, ContextAndSourceChangesMakeNewEntries) {
  const std::string dir = TmpDir("key");
  const std::string src = WriteText(dir + "/text", 2000);
  const std::string root = dir + "/cache";
  auto a = EnsureTextDataset(Options(src, root, 16));
  auto b = EnsureTextDataset(Options(src, root, 32));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_NE(a->dir, b->dir);
  EXPECT_TRUE(b->converted);
  auto b_train = data::OpenDataset("t", b->train_dir);
  ASSERT_TRUE(b_train.ok());
  EXPECT_EQ((*b_train)->info().feature_spec().shape(0), 32);

  // Same size, new mtime (a reinstalled package): converted again.
  struct timeval times[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(utimes(src.c_str(), times), 0);
  auto c = EnsureTextDataset(Options(src, root, 16));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->dir, a->dir);
  EXPECT_TRUE(c->converted);
  // Different size: converted again, and the entry serves the new text.
  WriteText(src, 3000);
  auto d = EnsureTextDataset(Options(src, root, 16));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE(d->dir, c->dir);
  auto d_train = data::OpenDataset("t", d->train_dir);
  auto d_eval = data::OpenDataset("t", d->eval_dir);
  ASSERT_TRUE(d_train.ok() && d_eval.ok());
  EXPECT_EQ((*d_train)->num_samples() + (*d_eval)->num_samples(), 3000 / 17);
}

TEST(TextCacheTest, ConcurrentCallersAgreeOnOneCompleteEntry) {
  const std::string dir = TmpDir("race");
  const std::string src = WriteText(dir + "/text", 20000);
  const std::string root = dir + "/cache";
  constexpr int kCallers = 4;
  std::vector<absl::StatusOr<CachedText>> results(kCallers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] { results[i] = EnsureTextDataset(Options(src, root, 16)); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->dir, results[0]->dir);
  }
  EXPECT_EQ(Entries(root), std::vector<std::string>{results[0]->dir.substr(root.size() + 1)});
  auto train = data::OpenDataset("t", results[0]->train_dir);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_GT((*train)->num_samples(), 1000);
}

TEST(TextCacheTest, ErrorsLeaveNoEntry) {
  const std::string dir = TmpDir("errors");
  const std::string root = dir + "/cache";
  auto missing = EnsureTextDataset(Options(dir + "/nothing", root, 16));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  const std::string tiny = WriteText(dir + "/tiny", 20);  // one window of 17
  auto short_text = EnsureTextDataset(Options(tiny, root, 16));
  EXPECT_TRUE(absl::IsInvalidArgument(short_text.status())) << short_text.status();
  EXPECT_TRUE(Entries(root).empty()) << "a failed conversion must not leave a cache entry";
  TextCacheOptions none = Options(tiny, root, 16);
  none.sources.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(EnsureTextDataset(none).status()));
  TextCacheOptions no_root = Options(tiny, "", 16);
  EXPECT_TRUE(absl::IsInvalidArgument(EnsureTextDataset(no_root).status()));
  // A cache root that cannot be created (a file is in the way).
  WriteText(dir + "/file", 1);
  auto blocked = EnsureTextDataset(Options(WriteText(dir + "/ok", 2000), dir + "/file/cache", 16));
  EXPECT_FALSE(blocked.ok());
  EXPECT_TRUE(absl::StrContains(blocked.status().message(), dir + "/file/cache"))
      << blocked.status();
}

}  // namespace
}  // namespace convert
}  // namespace tandem
