// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), the
// checksum of iSCSI, ext4 and LevelDB, and of tandem's record shards and
// checkpoints. Uses the SSE4.2 crc32 instruction
// when the build targets it (x86-64-v2 and up), a table otherwise; both give
// identical results (tested).
//
//   uint32_t crc = Crc32c(data, n);
//   crc = Crc32cExtend(crc, more, m);   // == Crc32c(data ++ more)
//
// Thread-safe: pure functions.
#ifndef TANDEM_COMMON_IO_CRC32C_H_
#define TANDEM_COMMON_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tandem {


// CRC32C of `data ++ [p, p + n)` given crc = CRC32C(data).
uint32_t Crc32cExtend(uint32_t crc, const void* p, size_t n);

inline uint32_t Crc32c(const void* p, size_t n) { return Crc32cExtend(0, p, n); }

namespace internal {
// The table implementation, exposed for tests.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* p, size_t n);
}  // namespace internal


}  // namespace tandem

#endif  // TANDEM_COMMON_IO_CRC32C_H_
