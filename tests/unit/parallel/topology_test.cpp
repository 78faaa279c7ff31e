#include "parallel/topology.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/errors.h"

namespace qmpi {
namespace {

using Names = std::vector<std::string>;

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(Err::Internal, "none");
}

TEST(FakeHosts, ListAndCountFormsAgree) {
  const Names expected{"h1", "h1", "h1", "h2", "h2", "h2"};
  EXPECT_EQ(parse_fake_hosts("h1,h1,h1,h2,h2,h2", 6), expected);
  EXPECT_EQ(parse_fake_hosts("h1:3,h2:3", 6), expected);
  EXPECT_EQ(parse_fake_hosts("h1:2, h1 ,h2:3", 6), expected);
  EXPECT_EQ(parse_fake_hosts("a,b,a", 3), (Names{"a", "b", "a"}));
}

TEST(FakeHosts, RankCountMustMatch) {
  Error e = error_of([] { parse_fake_hosts("h1:3,h2:2", 6); });
  EXPECT_EQ(e.code(), Err::Usage);
  EXPECT_NE(e.message().find("QMPI_FAKE_HOSTS=h1:3,h2:2 names 5 ranks but the job has 6"),
            std::string::npos)
      << e.message();
}

TEST(FakeHosts, MalformedEntries) {
  for (const char* bad : {"h1:0", "h1:x", "h1:3x", ":3", "h1,,h2", ""}) {
    Error e = error_of([bad] { parse_fake_hosts(bad, 3); });
    EXPECT_EQ(e.code(), Err::Usage) << bad;
    EXPECT_NE(e.message().find("QMPI_FAKE_HOSTS="), std::string::npos) << e.message();
  }
}

TEST(HostSlots, IndexAndLocalRankFollowRankOrder) {
  auto s = slots_from_host_names({"a", "a", "b", "b", "a"});
  ASSERT_EQ(s.size(), 5u);
  std::vector<int> index, local, size;
  for (const auto& x : s) {
    index.push_back(x.host_index);
    local.push_back(x.local_rank);
    size.push_back(x.local_size);
  }
  EXPECT_EQ(index, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(local, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(size, (std::vector<int>{3, 3, 2, 2, 3}));
  EXPECT_EQ(s[2].host, "b");
}

TEST(Device, CpuRanksSayCpu) {
  DeviceChoice d = choose_device(false, 2, 6, "0,1", false, "h1");
  EXPECT_EQ(d.index, -1);
  EXPECT_EQ(d.label, "cpu");
}

TEST(Device, UnsetVisibleDevicesUsesLocalRank) {
  DeviceChoice d = choose_device(true, 2, 3, nullptr, false, "h1");
  EXPECT_EQ(d.index, 2);
  EXPECT_EQ(d.label, "cuda:2");
}

TEST(Device, LocalRankMapsThroughVisibleList) {
  DeviceChoice d = choose_device(true, 1, 2, "3,5", false, "h1");
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.label, "cuda:1 (GPU 5)");
  EXPECT_EQ(choose_device(true, 0, 1, "GPU-abc", false, "h1").label, "cuda:0 (GPU GPU-abc)");
}

TEST(Device, MoreRanksThanVisibleDevices) {
  Error e = error_of([] { choose_device(true, 0, 3, "0,1", false, "node7"); });
  EXPECT_EQ(e.code(), Err::VisibleDevices);
  EXPECT_NE(e.message().find("host node7 runs 3 ranks but CUDA_VISIBLE_DEVICES=0,1 shows only 2"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("at most 2 ranks"), std::string::npos) << e.fix();
}

TEST(Device, SharingWrapsRoundRobin) {
  DeviceChoice d = choose_device(true, 2, 3, "0,1", true, "h1");
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.label, "cuda:0 (GPU 0)");
}

TEST(Device, DuplicateAndEmptyLists) {
  Error dup = error_of([] { choose_device(true, 0, 2, "0,1,1", false, "h1"); });
  EXPECT_EQ(dup.code(), Err::VisibleDevices);
  EXPECT_NE(dup.message().find("lists device 1 twice"), std::string::npos) << dup.message();
  Error none = error_of([] { choose_device(true, 0, 2, "", false, "h1"); });
  EXPECT_EQ(none.code(), Err::NoGpu);
  EXPECT_NE(none.message().find("hides every GPU"), std::string::npos) << none.message();
}

}  // namespace
}  // namespace qmpi
