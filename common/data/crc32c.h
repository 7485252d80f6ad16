// CRC-32C (Castagnoli), the checksum of tandem's record shards. Uses the
// SSE4.2 crc32 instruction when the build enables it (-march=x86-64-v2 does),
// a table otherwise; both give identical values. Thread-safe (pure).
#ifndef TANDEM_COMMON_DATA_CRC32C_H_
#define TANDEM_COMMON_DATA_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tandem {
namespace data {

// Extends `crc` (0 to start) over `n` bytes at `p`.
uint32_t Crc32c(const void* p, size_t n, uint32_t crc = 0);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_CRC32C_H_
