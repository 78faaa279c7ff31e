#include "io/checksum.h"

#include <array>
#include <cstring>

namespace qmpi {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;
constexpr int kSlices = 16;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of byte b followed by
// k zero bytes, which lets the loop below fold 16 input bytes per step (slicing-by-16).
using Tables = std::array<std::array<uint32_t, 256>, kSlices>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (int s = 1; s < kSlices; ++s)
    for (uint32_t b = 0; b < 256; ++b) t[s][b] = (t[s - 1][b] >> 8) ^ t[0][t[s - 1][b] & 0xFF];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t checksum_crc32(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 16) {
    uint32_t w[4];
    std::memcpy(w, p, 16);
    w[0] ^= c;  // the tables assume little-endian words, as on every machine qmpi targets
    c = 0;
    for (int k = 0; k < 4; ++k)
      for (int b = 0; b < 4; ++b) c ^= kTables[15 - 4 * k - b][(w[k] >> (8 * b)) & 0xFF];
    p += 16;
    n -= 16;
  }
  while (n--) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

}  // namespace qmpi
