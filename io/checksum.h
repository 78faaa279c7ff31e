// CRC-32 as zlib computes it (polynomial 0xEDB88320, reflected, init and final xor 0xFFFFFFFF),
// so a checksum qmpi stores can be recomputed with Python's zlib.crc32 or `crc32` of any tool.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qmpi {

// Continues `crc` (the value returned for the bytes before) over n more bytes:
// checksum_crc32(b, m, checksum_crc32(a, n)) is the CRC of a followed by b; start with 0.
uint32_t checksum_crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace qmpi
