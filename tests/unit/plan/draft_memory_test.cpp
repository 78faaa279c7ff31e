// A draft model in the plan (plan/draft_memory.h): Qwen2.5-0.5B-Instruct as the draft of
// Qwen2.5-72B-Instruct at --tp 2 --pp 3 costs rank 0 exactly its weights (the facts sheet's
// 0.99 GB in bf16) and its 12288 bytes of K and V per cached token, and no other rank anything.
#include <gtest/gtest.h>

#include <string>

#include "plan/draft_memory.h"
#include "plan/memory_model.h"

namespace qmpi {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/" + name + ".json";
}

TEST(DraftMemory, ADraftCostsRankZeroItsWeightsAndItsKv) {
  const ModelConfig target = ModelConfig::load(fixture_path("qwen2.5-72b-instruct"));
  const ModelConfig draft = ModelConfig::load(fixture_path("qwen2.5-0.5b-instruct"));
  PlanInputs plain;
  plain.max_model_len = 8192;
  PlanInputs with = plain;
  add_draft_model(with, fixture_path("qwen2.5-0.5b-instruct"));
  EXPECT_EQ(with.draft_kv_per_token, 12288u);  // facts §7
  EXPECT_EQ(with.draft_weights, model_weight_bytes(draft, plain));
  EXPECT_NEAR(double(with.draft_weights) / 1e9, 0.99, 0.006);

  const Layout layout{2, 3, {}};
  const std::vector<TensorSpec> tensors = expected_tensors(target);
  for (int r = 0; r < layout.world_ranks(); ++r) {
    const ShardPlan plan = make_shard_plan(target, layout, r);
    const RankMemory a = rank_memory(target, plan, plain, tensors);
    const RankMemory b = rank_memory(target, plan, with, tensors);
    const uint64_t draft_weights = r == 0 ? with.draft_weights : 0;
    const uint64_t draft_kv = r == 0 ? with.draft_kv_per_token : 0;
    EXPECT_EQ(b.draft_weights, draft_weights) << "rank " << r;
    EXPECT_EQ(b.weights, a.weights + draft_weights) << "rank " << r;
    EXPECT_EQ(b.kv_per_token, a.kv_per_token + draft_kv) << "rank " << r;
    EXPECT_EQ(b.kv_cache, b.kv_per_token * uint64_t(kv_cache_tokens(target, with))) << "rank " << r;
    EXPECT_EQ(b.activations, a.activations) << "rank " << r;
  }

  PlanInputs none = plain;
  add_draft_model(none, "");
  EXPECT_EQ(none.draft_weights, 0u);
  EXPECT_EQ(none.draft_kv_per_token, 0u);
}

}  // namespace
}  // namespace qmpi
