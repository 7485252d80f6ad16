#include "common/trace/trace.h"

namespace tandem {
namespace trace {
namespace internal {
std::atomic<Recorder*> g_active{nullptr};
}  // namespace internal

void Install(Recorder* r) { internal::g_active.store(r, std::memory_order_release); }

}  // namespace trace
}  // namespace tandem
