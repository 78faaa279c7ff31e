#include "io/checksum.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace qmpi {
namespace {

// Bit at a time, straight from the definition, to hold the table-driven version to.
uint32_t crc32_bitwise(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Crc32, KnownValues) {
  const std::string check = "123456789";  // the catalogued check value of CRC-32/ISO-HDLC
  EXPECT_EQ(checksum_crc32(check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(checksum_crc32(nullptr, 0), 0u);
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(checksum_crc32(fox.data(), fox.size()), 0x414FA339u);  // zlib.crc32 gives the same
}

TEST(Crc32, MatchesBitwiseAtEveryLengthAndSplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(300);
  for (auto& b : data) b = uint8_t(rng());
  for (size_t n = 0; n <= data.size(); n += 7) {
    const uint32_t want = crc32_bitwise(data.data(), n);
    ASSERT_EQ(checksum_crc32(data.data(), n), want) << n;
    const size_t cut = n / 3;  // continuing a CRC equals computing it in one go
    ASSERT_EQ(checksum_crc32(data.data() + cut, n - cut, checksum_crc32(data.data(), cut)), want);
  }
  // unaligned starts
  for (size_t off = 1; off < 8; ++off)
    EXPECT_EQ(checksum_crc32(data.data() + off, 100), crc32_bitwise(data.data() + off, 100));
}

}  // namespace
}  // namespace qmpi
