// Qwen3, Qwen2-MoE and Qwen3-MoE configs (facts §1a, §1b): the fields each family adds and the
// tensors they imply.
#include <gtest/gtest.h>

#include <set>

#include "core/errors.h"
#include "model/config.h"
#include "model/presets.h"

namespace qmpi {
namespace {

using nlohmann::json;

int64_t numel(const TensorSpec& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

int64_t param_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const auto& t : expected_tensors(c)) n += numel(t);
  return n;
}

std::set<std::string> names(const ModelConfig& c) {
  std::set<std::string> out;
  for (const auto& t : expected_tensors(c)) out.insert(t.name);
  return out;
}

TEST(FamilyConfig, Qwen3DecouplesHeadDimAndNormsQk) {
  const ModelConfig c = preset_config("qwen3-0.6b");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_width(), 2048);  // != hidden 1024
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.moe.num_experts, 0);
  const auto n = names(c);
  EXPECT_TRUE(n.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(n.count("model.layers.0.self_attn.q_proj.bias"));
  // 596.0M parameters (facts §7, tied).
  EXPECT_NEAR(double(param_count(c)), 596.0e6, 0.1e6);
}

TEST(FamilyConfig, Qwen3AttentionBiasIsRefused) {
  json j = preset_config("tiny-qwen3").raw;
  j["attention_bias"] = true;
  try {
    ModelConfig::from_json(j, "c.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ArchUnsupported);
    EXPECT_NE(e.message().find("attention_bias"), std::string::npos);
  }
}

TEST(FamilyConfig, Qwen3Moe30BMatchesTheFactsTable) {
  const ModelConfig c = preset_config("qwen3-30b-a3b");
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.experts_per_token, 8);
  EXPECT_EQ(c.moe.intermediate_size, 768);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_TRUE(c.is_moe_layer(l));
  const auto n = names(c);
  EXPECT_TRUE(n.count("model.layers.47.mlp.experts.127.down_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.0.mlp.gate.weight"));
  EXPECT_FALSE(n.count("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(n.count("model.layers.0.mlp.shared_expert_gate.weight"));
  EXPECT_NEAR(double(param_count(c)), 30.532e9, 0.001e9);  // facts §7
}

TEST(FamilyConfig, Qwen2MoeSharedExpertAndDenseLayers) {
  const ModelConfig c = preset_config("tiny-qwen2-moe");
  EXPECT_EQ(c.architecture, "Qwen2MoeForCausalLM");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.moe.shared_intermediate_size, 256);
  EXPECT_FALSE(c.moe.norm_topk_prob);
  EXPECT_FALSE(c.is_moe_layer(2));  // mlp_only_layers
  EXPECT_TRUE(c.is_moe_layer(3));
  const auto n = names(c);
  EXPECT_TRUE(n.count("model.layers.2.mlp.gate_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.3.mlp.shared_expert.up_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.3.mlp.shared_expert_gate.weight"));
  for (const auto& t : expected_tensors(c))
    if (t.name == "model.layers.3.mlp.shared_expert_gate.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 192}));
    }
}

TEST(FamilyConfig, SparseStepPicksLayers) {
  const ModelConfig c = preset_config("tiny-qwen3-moe");  // decoder_sparse_step 2
  std::vector<int64_t> sparse;
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.is_moe_layer(l)) sparse.push_back(l);
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 3, 5}));
}

TEST(FamilyConfig, MoeFieldsAreChecked) {
  const json base = preset_config("tiny-qwen3-moe").raw;
  json j = base;
  j["num_experts_per_tok"] = 8;  // more than the 7 experts
  EXPECT_THROW(ModelConfig::from_json(j, "c"), Error);
  j = base;
  j.erase("moe_intermediate_size");
  try {
    ModelConfig::from_json(j, "c");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ConfigKeyMissing);
  }
  j = base;
  j["mlp_only_layers"] = {6};
  EXPECT_THROW(ModelConfig::from_json(j, "c"), Error);
}

}  // namespace
}  // namespace qmpi
