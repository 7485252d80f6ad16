// CheckpointImage: the file written from an image is byte-identical to
// WriteCheckpoint's of the same view, with O_DIRECT and through the page
// cache, for sizes around the 4 KiB block and the piece size; the image
// keeps the captured state while its source changes; a later capture of
// the same layout reuses the buffer; bad views and mid-file failures are
// errors that leave the previous file alone.
#include "common/checkpoint/checkpoint_image.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace checkpoint {
namespace {

std::string TestDir(const std::string& name) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

// A shard of `n` parameters with two optimizer buffers and blobs whose
// names make the sections' offsets odd.
struct State {
  std::vector<float> params, m, v;
  std::string cursor = "cur", spec = "mlp:784,10";
  explicit State(int64_t n) : params(n), m(n), v(n) { Set(1); }
  void Set(int step) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] = 0.25f * static_cast<float>(i % 101) + step;
      m[i] = -1e-3f * static_cast<float>(i % 7) * step;
      v[i] = 1e-6f * static_cast<float>(i % 13) + step;
    }
    cursor = "cursor-" + std::to_string(step);
  }
  CheckpointView View(int64_t step) const {
    CheckpointView view;
    view.model_fingerprint = 0xfeed;
    view.step = step;
    view.total_params = static_cast<int64_t>(params.size()) + 5;
    view.range_lo = 5;
    view.range_hi = view.total_params;
    view.params = params;
    view.optimizer_name = "adamw";
    view.optimizer_state = {{"m", m}, {"v", v}};
    view.blobs = {{"data_cursor", cursor}, {"model_spec", spec}};
    return view;
  }
};

TEST(CheckpointImageTest, FileIsByteIdenticalToWriteCheckpointDirectAndBuffered) {
  const std::string dir = TestDir("identical");
  // 0 parameters; a file just under, at and over one block; several pieces.
  for (int64_t n : {0, 950, 1003, 1100, 300001}) {
    State s(n);
    const std::string want = dir + "/want-" + std::to_string(n);
    ASSERT_TRUE(WriteCheckpoint(want, s.View(7)).ok());
    for (bool direct : {true, false}) {
      CheckpointImage image;
      image.Capture(s.View(7));
      ImageWriteOptions o;
      o.direct = direct;
      o.piece_bytes = 64 << 10;  // several pieces for the large one
      const std::string got = dir + "/got-" + std::to_string(n) + (direct ? "-d" : "-b");
      ASSERT_TRUE(image.Write(got, o).ok()) << n;
      EXPECT_EQ(image.file_size(), ReadFile(want).size());
      EXPECT_TRUE(ReadFile(got) == ReadFile(want)) << n << " parameters, direct " << direct;
      EXPECT_EQ(image.bytes() % 4096, 0);
      EXPECT_GE(static_cast<uint64_t>(image.bytes()), image.file_size());
      auto c = ReadCheckpoint(got, {});
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(c->step, 7);
    }
  }
}

TEST(CheckpointImageTest, HoldsTheCapturedStateWhileTheSourceChangesAndReusesItsBuffer) {
  const std::string dir = TestDir("changes");
  State s(20000);
  CheckpointImage image;
  image.Capture(s.View(1));
  const int64_t held = image.bytes();
  const std::string want = dir + "/want";
  ASSERT_TRUE(WriteCheckpoint(want, s.View(1)).ok());
  s.Set(2);  // training goes on
  ASSERT_TRUE(image.Write(dir + "/got", {}).ok());
  EXPECT_TRUE(ReadFile(dir + "/got") == ReadFile(want));

  image.Capture(s.View(2));  // the same layout: no new buffer, same bytes held
  EXPECT_EQ(image.bytes(), held);
  EXPECT_EQ(image.step(), 2);
  ASSERT_TRUE(image.Write(dir + "/got2", {}).ok());
  ASSERT_TRUE(WriteCheckpoint(want, s.View(2)).ok());
  EXPECT_TRUE(ReadFile(dir + "/got2") == ReadFile(want));
}

TEST(CheckpointImageTest, AFailureMidFileLeavesThePreviousFileAndNoTemporary) {
  const std::string dir = TestDir("midfile");
  const std::string path = dir + "/ckpt";
  State s(100000);
  ASSERT_TRUE(WriteCheckpoint(path, s.View(1)).ok());
  const std::string before = ReadFile(path);
  CheckpointImage image;
  s.Set(2);
  image.Capture(s.View(2));
  ImageWriteOptions o;
  o.piece_bytes = 64 << 10;
  std::vector<uint64_t> offsets;
  o.write.before_write = [&](uint64_t offset, uint64_t) -> absl::Status {
    offsets.push_back(offset);
    if (offsets.size() == 3) return absl::ResourceExhaustedError("test hook: disk full");
    return absl::OkStatus();
  };
  absl::Status st = image.Write(path, o);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 4096, 4096 + (64 << 10)}));
  EXPECT_TRUE(ReadFile(path) == before);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"ckpt"});
}

TEST(CheckpointImageTest, ABadViewOrNoCaptureIsAnErrorNamingTheFile) {
  const std::string dir = TestDir("bad");
  CheckpointImage image;
  absl::Status st = image.Write(dir + "/none", {});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  State s(10);
  CheckpointView v = s.View(3);
  v.range_hi = v.total_params + 1;  // outside the vector
  image.Capture(v);
  st = image.Write(dir + "/bad", {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(dir + "/bad"), std::string::npos) << st;
  EXPECT_TRUE(ListDir(dir).empty());
}

}  // namespace
}  // namespace checkpoint
}  // namespace tandem
