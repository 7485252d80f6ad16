#include "services/worker/recovery_fixture.h"

namespace tandem {
namespace worker {

dataserver::DataServer* RecoveryFixture::data_ = nullptr;

}  // namespace worker
}  // namespace tandem
