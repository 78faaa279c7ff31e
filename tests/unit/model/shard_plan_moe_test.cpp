// Expert parallelism in the shard plan: whole experts split over the TP ranks (uneven allowed),
// the shared expert split by columns, routers and q/k norms replicated.
#include <gtest/gtest.h>

#include "model/presets.h"
#include "model/shard_plan.h"

namespace qmpi {
namespace {

std::string layer(int i, const std::string& rest) {
  return "model.layers." + std::to_string(i) + "." + rest;
}

TEST(ShardPlanMoe, ExpertsSplitWholeAndUnevenOverTp3) {
  const ModelConfig c = preset_config("tiny-qwen2-moe");  // 8 experts
  const Layout l{3, 2, {}};
  std::vector<int64_t> sizes;
  for (int r = 0; r < 3; ++r) sizes.push_back(make_shard_plan(c, l, r).experts.size());
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 2}));
  for (int r = 0; r < 6; ++r) {
    const ShardPlan p = make_shard_plan(c, l, r);
    for (int e = 0; e < 8; ++e) {
      const auto s = p.slice_for(
          c, layer(int(p.layers.begin), "mlp.experts." + std::to_string(e) + ".down_proj.weight"));
      EXPECT_EQ(s.has_value(), e >= p.experts.begin && e < p.experts.end) << r << " " << e;
      if (s) {
        EXPECT_EQ(s->length, -1);  // whole
      }
    }
    EXPECT_TRUE(p.slice_for(c, layer(int(p.layers.begin), "mlp.gate.weight")));
    EXPECT_TRUE(p.slice_for(c, layer(int(p.layers.begin), "mlp.shared_expert_gate.weight")));
  }
}

TEST(ShardPlanMoe, EveryTensorElementHasOneOwnerPerStage) {
  for (const char* preset : {"tiny-qwen2-moe", "tiny-qwen3-moe", "tiny-qwen3"}) {
    const ModelConfig c = preset_config(preset);
    for (const Layout& l : valid_layouts(c, 6)) {
      std::vector<ShardPlan> plans;
      for (int r = 0; r < 6; ++r) plans.push_back(make_shard_plan(c, l, r));
      for (const auto& t : expected_tensors(c)) {
        if (t.name.find("model.layers.") != 0) continue;
        const bool replicated = t.name.ends_with("norm.weight") ||
                                t.name.ends_with("mlp.gate.weight") ||
                                t.name.ends_with("shared_expert_gate.weight");
        int64_t held = 0, holders = 0, extent = 0;
        for (const auto& p : plans)
          if (auto s = p.slice_for(c, t.name)) {
            ++holders;
            extent = t.shape[size_t(s->dim)];
            held += s->length < 0 ? extent : s->length;
          }
        ASSERT_GT(holders, 0) << preset << " " << t.name;
        if (replicated) {
          EXPECT_EQ(holders, l.tp) << preset << " " << t.name;
        } else if (t.name.find(".experts.") != std::string::npos) {
          EXPECT_EQ(holders, 1) << preset << " tp " << l.tp << " " << t.name;
        } else if (t.name.find(".mlp.") != std::string::npos) {
          EXPECT_EQ(held, extent) << preset << " tp " << l.tp << " " << t.name;
        }
      }
    }
  }
}

TEST(ShardPlanMoe, MoreRanksThanExpertsLeavesSomeRanksNone) {
  const ModelConfig c = preset_config("tiny-qwen3-moe");  // 7 experts, 12 heads
  const Layout l{12, 1, {}};
  int64_t total = 0, empty = 0;
  for (int r = 0; r < 12; ++r) {
    const Range e = make_shard_plan(c, l, r).experts;
    total += e.size();
    empty += e.size() == 0;
  }
  EXPECT_EQ(total, 7);
  EXPECT_EQ(empty, 5);
}

}  // namespace
}  // namespace qmpi
