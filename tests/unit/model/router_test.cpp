// The MoE router's host top-k (model/router.h) against the rules of facts §2c and the
// NumPy reference (tests/reference/qwen_family_ref.py: a stable sort, lower index first on ties).
#include "model/router.h"

#include <gtest/gtest.h>

#include <cmath>

namespace qmpi {
namespace {

TEST(Router, PicksTheMostProbableFirst) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.0f};
  const Routing r = route_tokens(logits.data(), 1, 4, 2, false);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 3}));
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  EXPECT_NEAR(r.weight[0], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(r.weight[1], std::exp(1.0) / z, 1e-6);
}

TEST(Router, TiesGoToTheLowerExpertIndex) {
  // Experts 1, 2 and 4 tie for first; top-2 takes 1 then 2, as torch.topk does.
  const std::vector<float> logits = {0.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  const Routing r = route_tokens(logits.data(), 1, 5, 2, true);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.5f);
  // All equal: the first k.
  const std::vector<float> flat(6, 0.25f);
  EXPECT_EQ(route_tokens(flat.data(), 1, 6, 3, false).expert, (std::vector<int32_t>{0, 1, 2}));
}

TEST(Router, RenormalisationOnAndOff) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -3.0f, 0.5f, 0.5f, 0.5f, 4.0f};
  const Routing raw = route_tokens(logits.data(), 2, 4, 2, false);
  const Routing norm = route_tokens(logits.data(), 2, 4, 2, true);
  EXPECT_EQ(raw.expert, norm.expert);
  EXPECT_EQ(raw.expert, (std::vector<int32_t>{2, 0, 3, 0}));
  for (int t = 0; t < 2; ++t) {
    const float s_raw = raw.weight[size_t(2 * t)] + raw.weight[size_t(2 * t + 1)];
    EXPECT_LT(s_raw, 1.0f);  // raw softmax values of a subset
    EXPECT_NEAR(norm.weight[size_t(2 * t)] + norm.weight[size_t(2 * t + 1)], 1.0f, 1e-6);
    EXPECT_NEAR(norm.weight[size_t(2 * t)], raw.weight[size_t(2 * t)] / s_raw, 1e-6);
  }
}

TEST(Router, GroupsTokensByExpertAndLeavesUnchosenExpertsEmpty) {
  // 3 tokens, 4 experts, top 2: expert 3 is never chosen.
  const std::vector<float> logits = {5, 4, 0, -9, 0, 5, 4, -9, 4, 0, 5, -9};
  const Routing r = route_tokens(logits.data(), 3, 4, 2, true);
  const auto all = group_by_expert(r, Range{0, 4});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].rows, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(all[1].rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(all[2].rows, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(all[3].rows.empty());
  EXPECT_FLOAT_EQ(all[0].weights[0], r.weight[0]);
  // A rank holding experts [2, 4) sees only those.
  const auto part = group_by_expert(r, Range{2, 4});
  ASSERT_EQ(part.size(), 2u);
  EXPECT_EQ(part[0].rows, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(part[1].rows.empty());
  // A rank with no expert (tp > experts) has nothing to do.
  EXPECT_TRUE(group_by_expert(r, Range{4, 4}).empty());
}

}  // namespace
}  // namespace qmpi
