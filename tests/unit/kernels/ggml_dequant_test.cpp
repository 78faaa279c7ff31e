// The GGUF block decoders on hand-made blocks: every expected value below was worked out by hand
// from the block layouts (the scale bytes, the bit planes, the signed offsets), including Q4_K /
// Q5_K's 6-bit scale and min packing with scales above 15 and every min set, Q3_K's 6-bit
// scales and hmask, Q2_K's scale/min nibbles and Q6_K's int8 scales and ql/qh split.
#include "kernels/cpu/ggml_dequant.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace qmpi {
namespace {

void put_f16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(b.data() + at, &h, 2);
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& block) {
  const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t));
  EXPECT_EQ(block.size(), size_t(info.block_bytes));
  std::vector<float> y(size_t(info.block_elems), -999.0f);
  cpu::dequantize_ggml_row(t, block.data(), y.data(), info.block_elems);
  return y;
}

TEST(GgmlDequant, Q8_0IsInt8TimesScale) {
  std::vector<uint8_t> b(34);
  put_f16(b, 0, 0.5f);
  for (int i = 0; i < 32; ++i) b[size_t(2 + i)] = uint8_t(int8_t(i - 16));
  b[2 + 31] = uint8_t(int8_t(-128));
  const std::vector<float> y = decode(GgmlType::Q8_0, b);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[20], 2.0f);
  EXPECT_EQ(y[31], -64.0f);
}

TEST(GgmlDequant, Q4_0AndQ4_1SplitEachByteIntoElementsIAndIPlus16) {
  std::vector<uint8_t> b(18);
  put_f16(b, 0, 2.0f);
  for (int i = 0; i < 16; ++i) b[size_t(2 + i)] = uint8_t(i | (15 - i) << 4);
  std::vector<float> y = decode(GgmlType::Q4_0, b);
  EXPECT_EQ(y[0], -16.0f);  // (0 - 8) * 2
  EXPECT_EQ(y[3], -10.0f);  // (3 - 8) * 2
  EXPECT_EQ(y[15], 14.0f);  // (15 - 8) * 2
  EXPECT_EQ(y[16], 14.0f);  // high nibble of byte 0: 15
  EXPECT_EQ(y[31], -16.0f);

  std::vector<uint8_t> c(20);
  put_f16(c, 0, 0.25f);
  put_f16(c, 2, -1.0f);
  for (int i = 0; i < 16; ++i) c[size_t(4 + i)] = uint8_t(i | (15 - i) << 4);
  y = decode(GgmlType::Q4_1, c);
  EXPECT_EQ(y[0], -1.0f);      // 0 * 0.25 - 1
  EXPECT_EQ(y[5], 0.25f);      // 5 * 0.25 - 1
  EXPECT_EQ(y[16], 2.75f);     // 15 * 0.25 - 1
  EXPECT_EQ(y[16 + 9], 0.5f);  // (15 - 9) * 0.25 - 1
}

TEST(GgmlDequant, Q5TakesBitIOfQhAsElementIsFifthBit) {
  // qh = 0x80010001: bits 0, 16 and 31 set.
  std::vector<uint8_t> b(22);
  put_f16(b, 0, 1.0f);
  b[2] = 0x01, b[3] = 0x00, b[4] = 0x01, b[5] = 0x80;
  for (int i = 0; i < 16; ++i) b[size_t(6 + i)] = uint8_t(3 | 12 << 4);
  std::vector<float> y = decode(GgmlType::Q5_0, b);
  EXPECT_EQ(y[0], 3.0f);    // 3 | 16 -> 19 - 16
  EXPECT_EQ(y[1], -13.0f);  // 3 - 16
  EXPECT_EQ(y[16], 12.0f);  // 12 | 16 -> 28 - 16
  EXPECT_EQ(y[17], -4.0f);  // 12 - 16
  EXPECT_EQ(y[31], 12.0f);

  std::vector<uint8_t> c(24);
  put_f16(c, 0, 0.5f);
  put_f16(c, 2, 3.0f);
  c[4] = 0x01, c[5] = 0x00, c[6] = 0x01, c[7] = 0x80;
  for (int i = 0; i < 16; ++i) c[size_t(8 + i)] = uint8_t(3 | 12 << 4);
  y = decode(GgmlType::Q5_1, c);
  EXPECT_EQ(y[0], 12.5f);   // 19 * 0.5 + 3
  EXPECT_EQ(y[1], 4.5f);    // 3 * 0.5 + 3
  EXPECT_EQ(y[16], 17.0f);  // 28 * 0.5 + 3
  EXPECT_EQ(y[30], 9.0f);   // 12 * 0.5 + 3
}

// Scales {1, 20, 33, 63, 17, 40, 5, 62} and mins {0, 3, 50, 63, 16, 33, 2, 47}, packed by hand:
//   s[0..3]  = scale j | (scale j+4 >> 4) << 6 = 1|1<<6, 20|2<<6, 33|0, 63|3<<6
//   s[4..7]  = min j | (min j+4 >> 4) << 6     = 0|1<<6, 3|2<<6, 50|0, 63|2<<6
//   s[8..11] = (scale j+4 & 15) | (min j+4 & 15) << 4 = 1|0, 8|1<<4, 5|2<<4, 14|15<<4
constexpr std::array<uint8_t, 12> kKScales{65, 148, 33, 255, 64, 131, 50, 191, 1, 24, 37, 254};
constexpr std::array<int, 8> kKScale{1, 20, 33, 63, 17, 40, 5, 62};
constexpr std::array<int, 8> kKMin{0, 3, 50, 63, 16, 33, 2, 47};

TEST(GgmlDequant, KQuantSixBitScalesAndMinsUnpack) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc = 0, mn = 0;
    cpu::k_quant_scale_min(kKScales.data(), j, sc, mn);
    EXPECT_EQ(sc, kKScale[size_t(j)]) << "sub-block " << j;
    EXPECT_EQ(mn, kKMin[size_t(j)]) << "sub-block " << j;
  }
}

// qs[32 p + l] = (l & 15) | (15 - (l & 15)) << 4: sub-block 2p has q = l & 15, 2p + 1 has
// q = 15 - (l & 15).
TEST(GgmlDequant, Q4_KUsesEachSubBlocksScaleAndMin) {
  std::vector<uint8_t> b(144);
  put_f16(b, 0, 0.5f);
  put_f16(b, 2, 0.25f);
  std::memcpy(b.data() + 4, kKScales.data(), 12);
  for (int i = 0; i < 128; ++i) b[size_t(16 + i)] = uint8_t((i & 15) | (15 - (i & 15)) << 4);
  const std::vector<float> y = decode(GgmlType::Q4_K, b);
  EXPECT_EQ(y[0], 0.0f);            // 0.5 * 1 * 0 - 0.25 * 0
  EXPECT_EQ(y[32 + 1], 139.25f);    // 0.5 * 20 * 14 - 0.25 * 3
  EXPECT_EQ(y[96 + 15], -15.75f);   // 0.5 * 63 * 0 - 0.25 * 63
  EXPECT_EQ(y[128 + 5], 38.5f);     // 0.5 * 17 * 5 - 0.25 * 16
  EXPECT_EQ(y[160 + 20], 211.75f);  // 0.5 * 40 * (15 - 4) - 0.25 * 33
  EXPECT_EQ(y[192 + 31], 37.0f);    // 0.5 * 5 * 15 - 0.25 * 2
  EXPECT_EQ(y[224 + 3], 360.25f);   // 0.5 * 62 * 12 - 0.25 * 47
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32, q = s % 2 ? 15 - (l & 15) : l & 15;
    EXPECT_EQ(y[size_t(e)],
              0.5f * float(kKScale[size_t(s)]) * float(q) - 0.25f * float(kKMin[size_t(s)]))
        << e;
  }
}

// Q4_K's block plus qh[l] = 0xff for odd l: odd elements of every sub-block gain 16.
TEST(GgmlDequant, Q5_KAddsBitSOfQhAsTheFifthBit) {
  std::vector<uint8_t> b(176);
  put_f16(b, 0, 0.5f);
  put_f16(b, 2, 0.25f);
  std::memcpy(b.data() + 4, kKScales.data(), 12);
  for (int l = 0; l < 32; ++l) b[size_t(16 + l)] = l % 2 ? 0xff : 0x00;
  for (int i = 0; i < 128; ++i) b[size_t(48 + i)] = uint8_t((i & 15) | (15 - (i & 15)) << 4);
  const std::vector<float> y = decode(GgmlType::Q5_K, b);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[32 + 1], 299.25f);   // 0.5 * 20 * (14 + 16) - 0.75
  EXPECT_EQ(y[128 + 5], 174.5f);   // 0.5 * 17 * (5 + 16) - 4
  EXPECT_EQ(y[224 + 3], 856.25f);  // 0.5 * 62 * (12 + 16) - 11.75
  EXPECT_EQ(y[224 + 4], 329.25f);  // 0.5 * 62 * 11 - 11.75
}

// Q6_K with ql[i] = i, qh[i] = 7 i mod 256, scales[i] = 9 i - 70, d = 1/8.
TEST(GgmlDequant, Q6_KJoinsQlNibblesAndQhPairs) {
  std::vector<uint8_t> b(210);
  for (int i = 0; i < 128; ++i) b[size_t(i)] = uint8_t(i);
  for (int i = 0; i < 64; ++i) b[size_t(128 + i)] = uint8_t(7 * i);
  for (int i = 0; i < 16; ++i) b[size_t(192 + i)] = uint8_t(int8_t(9 * i - 70));
  put_f16(b, 208, 0.125f);
  const std::vector<float> y = decode(GgmlType::Q6_K, b);
  // e 5: ql[5] low 5, qh[5] = 35 bits 0-1 = 3: q 53 - 32 = 21, scale -70.
  EXPECT_EQ(y[5], -183.75f);
  // e 63 (k 1, l 31): ql[63] low 15, qh[31] = 217 bits 2-3 = 2: q 47 - 32 = 15, scale -43.
  EXPECT_EQ(y[63], -80.625f);
  // e 200 (h 1, k 2, l 8): ql[72] high 4, qh[40] = 24 bits 4-5 = 1: q 20 - 32 = -12, scale 38.
  EXPECT_EQ(y[200], -57.0f);
  // e 255 (h 1, k 3, l 31): ql[127] high 7, qh[63] = 185 bits 6-7 = 2: q 39 - 32 = 7, scale 65.
  EXPECT_EQ(y[255], 56.875f);
}

// Q2_K/Q3_K with qs = 0xe4 (planes 0, 1, 2, 3) in the first half and 0x1b (3, 2, 1, 0) in the
// second: element 128 h + 32 j + l has q = j for h = 0 and 3 - j for h = 1.
TEST(GgmlDequant, Q2_KTakesScaleAndMinNibbles) {
  std::vector<uint8_t> b(84);
  for (int i = 0; i < 16; ++i) b[size_t(i)] = uint8_t(i | (15 - i) << 4);
  for (int i = 0; i < 64; ++i) b[size_t(16 + i)] = i < 32 ? 0xe4 : 0x1b;
  put_f16(b, 80, 0.5f);
  put_f16(b, 82, 0.25f);
  const std::vector<float> y = decode(GgmlType::Q2_K, b);
  EXPECT_EQ(y[0], -3.75f);   // 0 - 0.25 * 15
  EXPECT_EQ(y[100], 6.75f);  // j 3, sub-block 6: 0.5 * 6 * 3 - 0.25 * 9
  EXPECT_EQ(y[170], 8.75f);  // h 1, j 1 (q 2), sub-block 10: 0.5 * 10 * 2 - 0.25 * 5
  EXPECT_EQ(y[255], 0.0f);   // h 1, j 3 (q 0), sub-block 15: 0 - 0
}

// Scales -30, -26, ..., 30 (stored 2, 6, ..., 62): low nibbles 2, 6, 10, 14 repeating, top two
// bits 0 (j < 4), 1, 2, 3 (j >= 12). Bytes 0..7 = low(j) | low(j + 8) << 4 = 0x22, 0x66, 0xaa,
// 0xee twice; bytes 8..11 = top(j) | top(j + 4) << 2 | top(j + 8) << 4 | top(j + 12) << 6 = 0xe4.
// hmask[l] = 0x0f for l < 16 (bits h 0 j 0..3), 0xf0 above (h 1).
TEST(GgmlDequant, Q3_KTakesSixBitScalesAndTheHmaskBit) {
  std::vector<uint8_t> b(110);
  for (int l = 0; l < 32; ++l) b[size_t(l)] = l < 16 ? 0x0f : 0xf0;
  for (int i = 0; i < 64; ++i) b[size_t(32 + i)] = i < 32 ? 0xe4 : 0x1b;
  const std::array<uint8_t, 12> scales{0x22, 0x66, 0xaa, 0xee, 0x22, 0x66,
                                       0xaa, 0xee, 0xe4, 0xe4, 0xe4, 0xe4};
  std::memcpy(b.data() + 96, scales.data(), 12);
  put_f16(b, 108, 0.5f);
  const std::vector<float> y = decode(GgmlType::Q3_K, b);
  EXPECT_EQ(y[21], 52.0f);    // h 0 j 0 l 21: bit clear, q 0 - 4, scale -26
  EXPECT_EQ(y[98], -9.0f);    // h 0 j 3 l 2: bit set, q 3, scale -6
  EXPECT_EQ(y[195], -27.0f);  // h 1 j 2 l 3: bit clear, q 1 - 4, scale 18
  EXPECT_EQ(y[60], 27.0f);    // h 0 j 1 l 28: bit clear, q 1 - 4, scale -18
  EXPECT_EQ(y[130], -1.0f);   // h 1 j 0 l 2: bit clear, q 3 - 4, scale 2
  EXPECT_EQ(y[180], 14.0f);   // h 1 j 1 l 20: bit set, q 2, scale 14
}

TEST(GgmlDequant, PlainFloatsDecodeAsThemselves) {
  const std::array<float, 3> f{1.5f, -2.25f, 1e-3f};
  std::vector<uint8_t> raw(12), half(6), brain(6);
  std::memcpy(raw.data(), f.data(), 12);
  for (int i = 0; i < 3; ++i) {
    const uint16_t h = f32_to_f16(f[size_t(i)]), bf = f32_to_bf16(f[size_t(i)]);
    std::memcpy(half.data() + 2 * i, &h, 2);
    std::memcpy(brain.data() + 2 * i, &bf, 2);
  }
  std::array<float, 3> y{};
  cpu::dequantize_ggml_row(GgmlType::F32, raw.data(), y.data(), 3);
  EXPECT_EQ(y, f);
  cpu::dequantize_ggml_row(GgmlType::F16, half.data(), y.data(), 3);
  EXPECT_EQ(y[1], -2.25f);
  EXPECT_NEAR(y[2], 1e-3f, 1e-6f);
  cpu::dequantize_ggml_row(GgmlType::BF16, brain.data(), y.data(), 3);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.25f);
}

}  // namespace
}  // namespace qmpi
