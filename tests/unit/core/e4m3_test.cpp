// The fp8 e4m3 conversions the KV cache uses (core/dtype.h): round to nearest even,
// saturating at +-448, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"

namespace qmpi {
namespace {

TEST(E4m3, EveryCodeRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_to_f32(uint8_t(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << b;
      continue;
    }
    EXPECT_EQ(f32_to_e4m3(f), b) << b << " = " << f;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
}

TEST(E4m3, TiesGoToEvenAndLargeValuesSaturate) {
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // halfway 1 and 1.125: to 1 (even)
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);  // halfway 1.125 and 1.25: to 1.25
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);      // half the smallest subnormal
  EXPECT_EQ(f32_to_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);  // 1.5 steps: to 2
  EXPECT_EQ(f32_to_e4m3(0.0155f), 0x08);                    // a subnormal rounding up to 2^-6
  EXPECT_EQ(f32_to_e4m3(470.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
}

}  // namespace
}  // namespace qmpi
