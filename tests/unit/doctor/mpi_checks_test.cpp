// The default layout and the layout findings of `qmpi doctor`, on made-up hosts.
#include "doctor/mpi_checks.h"

#include <gtest/gtest.h>

#include "model/presets.h"

namespace qmpi::doctor {
namespace {

std::vector<HostSlot> hosts(std::vector<std::pair<std::string, int>> spec) {
  std::vector<std::string> names;
  for (const auto& [name, n] : spec)
    for (int i = 0; i < n; ++i) names.push_back(name);
  return slots_from_host_names(names);
}

const Finding* find(const std::vector<Finding>& fs, Err code) {
  for (const Finding& f : fs)
    if (f.code == code) return &f;
  return nullptr;
}

TEST(MpiChecks, DefaultLayoutKeepsTpInsideHosts) {
  auto l = default_layout(hosts({{"a", 6}}), nullptr);
  EXPECT_EQ(l.tp, 6);
  EXPECT_EQ(l.pp, 1);
  l = default_layout(hosts({{"a", 3}, {"b", 3}}), nullptr);
  EXPECT_EQ(l.tp, 3);
  EXPECT_EQ(l.pp, 2);
  l = default_layout(hosts({{"a", 4}, {"b", 2}}), nullptr);
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.pp, 3);
}

TEST(MpiChecks, DefaultLayoutWithAModelIsOneItCanRun) {
  ModelConfig half = preset_config("qwen2.5-0.5b");  // 14 heads, 2 KV heads, 24 layers
  auto l = default_layout(hosts({{"a", 6}}), &half);
  EXPECT_EQ(l.tp, 6);  // uneven (3,3,2,2,2,2 heads), but it runs
  EXPECT_EQ(l.pp, 1);
  half.num_heads = 4;  // too few heads for TP 6: the widest TP that divides the host is 3
  half.num_kv_heads = 2;
  l = default_layout(hosts({{"a", 6}}), &half);
  EXPECT_EQ(l.tp, 3);
  EXPECT_EQ(l.pp, 2);
}

TEST(MpiChecks, RanksPerHostListsEveryHost) {
  EXPECT_EQ(ranks_per_host(hosts({{"a", 4}, {"b", 2}})), "a: 4 ranks (0-3); b: 2 ranks (4-5)");
}

TEST(MpiChecks, WorldSizeOtherThanTheLayoutFails) {
  const ModelConfig tiny = preset_config("tiny");
  const auto fs = layout_findings(Layout{2, 3, {}}, false, hosts({{"a", 4}}), &tiny);
  const Finding* f = find(fs, Err::WorldSize);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->status, Status::Fail);
}

TEST(MpiChecks, SingleProcessChecksALayoutOnPaper) {
  const auto fs = layout_findings(Layout{2, 3, {}}, false, hosts({{"a", 1}}), nullptr);
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0].status, Status::Ok);
  EXPECT_NE(fs[0].message.find("mpirun -np 6 qmpi doctor --tp 2 --pp 3"), std::string::npos)
      << fs[0].message;
}

TEST(MpiChecks, LayoutTheModelCannotSplitFailsWithTheLayoutRule) {
  const ModelConfig half = preset_config("qwen2.5-0.5b");
  // 14 heads: TP 16 leaves two ranks without a query head.
  const auto fs = layout_findings(Layout{16, 1, {}}, false, hosts({{"a", 16}}), &half);
  const Finding* f = find(fs, Err::TpExceedsHeads);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->status, Status::Fail);
}

TEST(MpiChecks, UnevenSplitIsDescribedPerRank) {
  const ModelConfig half = preset_config("qwen2.5-0.5b");
  // 14 heads / 2 KV heads on 4 ranks: 4,4,3,3 query heads; rank 1 (heads 4-7) reads both.
  const auto fs = layout_findings(Layout{4, 1, {}}, false, hosts({{"a", 4}}), &half);
  bool found = false;
  for (const Finding& f : fs)
    if (f.message.find("can split the model") != std::string::npos) {
      found = true;
      EXPECT_EQ(f.status, Status::Ok);
      EXPECT_NE(f.message.find("3-4 query and 1-2 KV heads"), std::string::npos) << f.message;
      EXPECT_NE(f.message.find("5 KV-head copies of 2"), std::string::npos) << f.message;
    }
  EXPECT_TRUE(found);
}

TEST(MpiChecks, TpGroupAcrossHostsFails) {
  const auto fs = layout_findings(Layout{6, 1, {}}, false, hosts({{"a", 3}, {"b", 3}}), nullptr);
  const Finding* f = find(fs, Err::TpSpansHosts);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("TP group 0 (world ranks 0-5) spans a, b"), std::string::npos)
      << f->message;
  const auto good = layout_findings(Layout{3, 2, {}}, false, hosts({{"a", 3}, {"b", 3}}), nullptr);
  EXPECT_EQ(find(good, Err::TpSpansHosts), nullptr);
}

}  // namespace
}  // namespace qmpi::doctor
