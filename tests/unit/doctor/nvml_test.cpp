// NVML's topology levels as nvidia-smi names them, and NVML loading that never fails hard.
#include "doctor/nvml.h"

#include <gtest/gtest.h>

namespace qmpi::doctor {
namespace {

TEST(Nvml, TopologyLevelsMapToNvidiaSmiNames) {
  EXPECT_EQ(link_name(link_level_from_nvml(0), 0), "X");
  EXPECT_EQ(link_name(link_level_from_nvml(10), 0), "PIX");
  EXPECT_EQ(link_name(link_level_from_nvml(20), 0), "PXB");
  EXPECT_EQ(link_name(link_level_from_nvml(30), 0), "PHB");
  EXPECT_EQ(link_name(link_level_from_nvml(40), 0), "NODE");
  EXPECT_EQ(link_name(link_level_from_nvml(50), 0), "SYS");
  EXPECT_EQ(link_name(link_level_from_nvml(7), 0), "?");
  EXPECT_EQ(link_name(LinkLevel::NvLink, 18), "NV18");
}

TEST(Nvml, OnlyCrossSocketLinksAreSlowForTp) {
  EXPECT_TRUE(link_is_slow_for_tp(LinkLevel::Sys));
  for (LinkLevel l :
       {LinkLevel::NvLink, LinkLevel::Pix, LinkLevel::Pxb, LinkLevel::Phb, LinkLevel::Node})
    EXPECT_FALSE(link_is_slow_for_tp(l)) << link_name(l, 1);
}

TEST(Nvml, OpenEitherWorksOrSaysWhy) {
  std::string why;
  const auto nvml = Nvml::open(&why);
  if (nvml) {
    EXPECT_GE(nvml->device_count(), 0);
    EXPECT_FALSE(nvml->driver_version().empty());
  } else {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace qmpi::doctor
