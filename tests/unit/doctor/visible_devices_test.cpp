// CUDA_VISIBLE_DEVICES sanity: duplicates, out-of-range and silently ignored entries.
#include "doctor/visible_devices.h"

#include <gtest/gtest.h>

namespace qmpi::doctor {
namespace {

TEST(VisibleDevices, UnsetOrASoundListIsFine) {
  EXPECT_TRUE(check_visible_devices(nullptr, 8, 8).empty());
  EXPECT_TRUE(check_visible_devices("0,1,2,3", 4, 8).empty());
  EXPECT_TRUE(check_visible_devices("GPU-1234,GPU-5678", 2, -1).empty());
  EXPECT_TRUE(check_visible_devices("", 0, 8).empty());  // hides every GPU on purpose
}

TEST(VisibleDevices, DuplicateIsReported) {
  const auto p = check_visible_devices("0,1,0", 2, 8);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("entry 2 ('0')"), std::string::npos) << p[0].message;
  EXPECT_NE(p[0].message.find("second time"), std::string::npos) << p[0].message;
}

TEST(VisibleDevices, OutOfRangeIndexNamesTheHostsGpuCount) {
  const auto p = check_visible_devices("0,1,9", 2, 4);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("out of range: the host has 4 GPU(s)"), std::string::npos)
      << p[0].message;
}

TEST(VisibleDevices, EntriesTheRuntimeDroppedAreReportedWithoutNvml) {
  const auto p = check_visible_devices("0,1,7,2", 2, -1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("lists 4 GPUs but the CUDA runtime sees 2: entry 2 ('7')"),
            std::string::npos)
      << p[0].message;
}

TEST(VisibleDevices, EmptyEntryIsReported) {
  EXPECT_EQ(check_visible_devices("0,,1", 2, 4).size(), 1u);
}

}  // namespace
}  // namespace qmpi::doctor
