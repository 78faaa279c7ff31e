#include "core/byte_size.h"

#include <gtest/gtest.h>

#include "../expect_error.h"

namespace qmpi {
namespace {

TEST(GpuMemory, BareNumberIsGigabytesWithANote) {
  std::string note;
  EXPECT_EQ(parse_gpu_memory("80", "--gpu-mem", note), 80'000'000'000u);
  EXPECT_NE(note.find("--gpu-mem 80 read as 80GB"), std::string::npos) << note;
  EXPECT_EQ(parse_gpu_memory("24.5", "--gpu-mem", note), 24'500'000'000u);
}

TEST(GpuMemory, OneLetterUnitIsDecimal) {
  std::string note;
  EXPECT_EQ(parse_gpu_memory("80G", "--gpu-mem", note), 80'000'000'000u);
  EXPECT_NE(note.find("read as 80GB"), std::string::npos) << note;
  EXPECT_EQ(parse_gpu_memory("40 g", "--gpu-mem", note), 40'000'000'000u);
}

TEST(GpuMemory, ExplicitUnitsAsWrittenWithoutANote) {
  std::string note = "stale";
  EXPECT_EQ(parse_gpu_memory("80GB", "--gpu-mem", note), 80'000'000'000u);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(parse_gpu_memory("80GiB", "--gpu-mem", note), 80ull << 30);
  EXPECT_TRUE(note.empty());
}

TEST(GpuMemory, GarbageIsAUsageError) {
  std::string note;
  testing::expect_error([&] { parse_gpu_memory("lots", "--gpu-mem", note); }, Err::Usage,
                        {"--gpu-mem 'lots'"});
  testing::expect_error([&] { parse_gpu_memory("80X", "--gpu-mem", note); }, Err::Usage,
                        {"unknown unit"});
}

TEST(ByteSize, OtherOptionsStayStrict) {
  testing::expect_error([] { parse_byte_size("80G", "--host-mem"); }, Err::Usage, {"ambiguous"});
  EXPECT_EQ(parse_byte_size("80", "--host-mem"), 80u);
}

}  // namespace
}  // namespace qmpi
