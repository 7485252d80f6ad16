#include "services/shardserver/push_window.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace shardserver {

absl::StatusOr<int> PushWindowBytes(const char* env_value, int default_bytes) {
  if (env_value == nullptr || *env_value == 0) return default_bytes;
  constexpr int kMaxKib = 1 << 20;
  int kib = 0;
  if (!absl::SimpleAtoi(env_value, &kib) || kib < 0 || kib > kMaxKib) {
    return absl::InvalidArgumentError(absl::StrCat(
        kPushWindowEnv, "=", env_value, " is not a size in KiB (0..", kMaxKib,
        "; 0 = gRPC's auto-tuned window); unset it for the default ", default_bytes / 1024));
  }
  return kib * 1024;
}

std::string DescribePushWindow(int bytes) {
  if (bytes == 0) return absl::StrCat("push window auto-tuned by gRPC (", kPushWindowEnv, "=0)");
  return absl::StrCat("push window ", bytes / 1024, " KiB (", kPushWindowEnv, ")");
}

}  // namespace shardserver
}  // namespace tandem
