#include "model/shard_plan.h"

#include <gtest/gtest.h>

#include <map>

#include "core/errors.h"

namespace qmpi {
namespace {

ModelConfig make_config(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads,
                        int64_t head_dim, int64_t intermediate, int64_t vocab, bool tied) {
  ModelConfig c;
  c.architecture = "Qwen2ForCausalLM";
  c.model_type = "qwen2";
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = intermediate;
  c.vocab_size = vocab;
  c.tie_word_embeddings = tied;
  return c;
}

ModelConfig qwen05b() {
  return make_config(896, 24, 14, 2, 64, 4864, 151936, true);
}
ModelConfig qwen7b() {
  return make_config(3584, 28, 28, 4, 128, 18944, 152064, false);
}
ModelConfig qwen72b() {
  return make_config(8192, 80, 64, 8, 128, 29568, 152064, false);
}
ModelConfig tiny(bool tied) {
  return make_config(192, 6, 12, 6, 16, 384, 151936, tied);
}

// The error check_layout (or split_layers) throws, or fails the test when none is thrown.
Error layout_error(const ModelConfig& cfg, Layout layout) {
  try {
    check_layout(cfg, layout);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "check_layout accepted --tp " << layout.tp << " --pp " << layout.pp;
  return Error(Err::Internal, "no error");
}

void expect_slice(const std::optional<Slice>& s, int dim, int64_t start, int64_t length) {
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->dim, dim);
  EXPECT_EQ(s->start, start);
  EXPECT_EQ(s->length, length);
}

void expect_whole(const std::optional<Slice>& s) {
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->length, -1);
  EXPECT_EQ(s->start, 0);
}

std::string layer(int i, const std::string& rest) {
  return "model.layers." + std::to_string(i) + "." + rest;
}

TEST(SplitLayers, EvenWithRemainderOnFirstStages) {
  EXPECT_EQ(split_layers(80, 3, {}), (std::vector<int>{27, 27, 26}));
  EXPECT_EQ(split_layers(24, 1, {}), (std::vector<int>{24}));
  EXPECT_EQ(split_layers(6, 4, {}), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_EQ(split_layers(28, 2, {}), (std::vector<int>{14, 14}));
  EXPECT_EQ(split_layers(6, 6, {}), (std::vector<int>(6, 1)));
}

TEST(SplitLayers, OverrideIsUsedAsGiven) {
  EXPECT_EQ(split_layers(80, 3, {30, 25, 25}), (std::vector<int>{30, 25, 25}));
}

TEST(SplitLayers, BadOverridesExplainThemselves) {
  try {
    split_layers(80, 3, {40, 40});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::PipelineLayers);
    EXPECT_NE(e.message().find("lists 2 stages but --pp is 3"), std::string::npos) << e.message();
  }
  try {
    split_layers(80, 3, {27, 27, 27});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::PipelineLayers);
    EXPECT_NE(e.message().find("adds up to 81 layers but the model has 80"), std::string::npos)
        << e.message();
    EXPECT_NE(e.fix().find("--pp-layers 27,27,26"), std::string::npos) << e.fix();
  }
  try {
    split_layers(6, 3, {6, 0, 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::PipelineLayers);
    EXPECT_NE(e.message().find("stage 1 0 layers"), std::string::npos) << e.message();
  }
  try {
    split_layers(6, 8, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::PipelineLayers);
    EXPECT_NE(e.message().find("--pp 8 makes more pipeline stages than the model's 6 layers"),
              std::string::npos)
        << e.message();
  }
}

TEST(CheckLayout, AcceptsValidLayouts) {
  EXPECT_NO_THROW(check_layout(qwen72b(), {2, 3, {}}));
  EXPECT_NO_THROW(check_layout(qwen72b(), {8, 1, {}}));
  EXPECT_NO_THROW(check_layout(qwen72b(), {2, 3, {30, 25, 25}}));
  EXPECT_NO_THROW(check_layout(qwen05b(), {2, 1, {}}));
  EXPECT_NO_THROW(check_layout(qwen7b(), {4, 1, {}}));
  EXPECT_NO_THROW(check_layout(tiny(true), {6, 1, {}}));
  EXPECT_NO_THROW(check_layout(tiny(true), {3, 2, {}}));
  EXPECT_NO_THROW(check_layout(tiny(true), {1, 6, {}}));
}

TEST(CheckLayout, KvHeadsOn72BSuggestsTp2Pp3) {
  Error e = layout_error(qwen72b(), {6, 1, {}});
  EXPECT_EQ(e.code(), Err::KvHeadsNotDivisible);
  EXPECT_NE(e.message().find("num_key_value_heads (8) is not divisible by --tp 6"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("Use --tp 2 --pp 3 for the same 6 ranks"), std::string::npos) << e.fix();
  EXPECT_NE(e.fix().find("--tp 1 --pp 6"), std::string::npos) << e.fix();
  EXPECT_NE(e.render().find("QM103"), std::string::npos);
  EXPECT_EQ(e.exit_code(), 2);
}

TEST(CheckLayout, KvHeadsOn05B) {
  Error e = layout_error(qwen05b(), {7, 1, {}});
  EXPECT_EQ(e.code(), Err::KvHeadsNotDivisible);
  EXPECT_NE(e.message().find("num_key_value_heads (2) is not divisible by --tp 7"),
            std::string::npos);
  EXPECT_NE(e.fix().find("Use --tp 1 --pp 7"), std::string::npos) << e.fix();
}

TEST(CheckLayout, HeadsWhenKvHeadsDivide) {
  // A config whose query heads are not a multiple of its KV heads, so only the head rule breaks.
  ModelConfig c = make_config(96, 4, 6, 4, 16, 256, 1000, true);
  Error e = layout_error(c, {4, 1, {}});
  EXPECT_EQ(e.code(), Err::HeadsNotDivisible);
  EXPECT_NE(e.message().find("num_attention_heads (6) is not divisible by --tp 4"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("Use --tp 2 --pp 2"), std::string::npos) << e.fix();
}

TEST(CheckLayout, Intermediate) {
  ModelConfig c = tiny(true);
  c.intermediate_size = 100;
  Error e = layout_error(c, {3, 1, {}});
  EXPECT_EQ(e.code(), Err::IntermediateNotDivisible);
  EXPECT_NE(e.message().find("intermediate_size (100) is not divisible by --tp 3"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("Use --tp 1 --pp 3 for the same 3 ranks."), std::string::npos) << e.fix();
}

TEST(CheckLayout, TooManyStagesSuggestsMoreTp) {
  Error e = layout_error(tiny(true), {1, 8, {}});
  EXPECT_EQ(e.code(), Err::PipelineLayers);
  EXPECT_NE(e.message().find("--pp 8"), std::string::npos);
  EXPECT_NE(e.message().find("6 layers"), std::string::npos);
  EXPECT_NE(e.fix().find("Use --tp 2 --pp 4 for the same 8 ranks."), std::string::npos) << e.fix();
}

TEST(CheckLayout, NoLayoutForTheRankCount) {
  Error e = layout_error(tiny(true), {7, 1, {}});
  EXPECT_EQ(e.code(), Err::KvHeadsNotDivisible);
  EXPECT_NE(e.fix().find("No --tp x --pp layout of 7 ranks runs this model"), std::string::npos)
      << e.fix();
  EXPECT_NE(e.fix().find("num_hidden_layers (6)"), std::string::npos) << e.fix();
}

TEST(CheckLayout, PipelineOverrideChecked) {
  Error e = layout_error(qwen72b(), {2, 3, {27, 27, 27}});
  EXPECT_EQ(e.code(), Err::PipelineLayers);
  EXPECT_NE(e.message().find("81"), std::string::npos);
}

TEST(CheckLayout, NonPositiveSizesAreUsageErrors) {
  EXPECT_EQ(layout_error(tiny(true), {0, 1, {}}).code(), Err::Usage);
  EXPECT_EQ(layout_error(tiny(true), {1, 0, {}}).code(), Err::Usage);
}

TEST(ValidLayouts, LargestTpFirst) {
  auto v = valid_layouts(qwen72b(), 6);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].tp, 2);
  EXPECT_EQ(v[0].pp, 3);
  EXPECT_EQ(v[1].tp, 1);
  EXPECT_EQ(v[1].pp, 6);
  auto t = valid_layouts(tiny(true), 6);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].tp, 6);
  EXPECT_EQ(t[1].tp, 3);
  EXPECT_EQ(t[2].tp, 2);
  EXPECT_EQ(t[3].tp, 1);
  EXPECT_TRUE(valid_layouts(tiny(true), 7).empty());
}

TEST(ShardPlan, TinyTp3Pp2Rank4) {
  ModelConfig c = tiny(false);
  ShardPlan p = make_shard_plan(c, {3, 2, {}}, 4);
  EXPECT_EQ(p.stage, 1);
  EXPECT_EQ(p.tp_rank, 1);
  EXPECT_FALSE(p.first_stage);
  EXPECT_TRUE(p.last_stage);
  EXPECT_EQ(p.layers.begin, 3);
  EXPECT_EQ(p.layers.end, 6);
  EXPECT_EQ(p.q_heads.begin, 4);
  EXPECT_EQ(p.q_heads.end, 8);
  EXPECT_EQ(p.kv_heads.begin, 2);
  EXPECT_EQ(p.kv_heads.end, 4);
  EXPECT_EQ(p.intermediate.begin, 128);
  EXPECT_EQ(p.intermediate.end, 256);
  EXPECT_EQ(p.vocab.begin, 50646);
  EXPECT_EQ(p.vocab.end, 101292);

  expect_slice(p.slice_for(c, layer(3, "self_attn.q_proj.weight")), 0, 64, 64);
  expect_slice(p.slice_for(c, layer(3, "self_attn.q_proj.bias")), 0, 64, 64);
  expect_slice(p.slice_for(c, layer(4, "self_attn.k_proj.weight")), 0, 32, 32);
  expect_slice(p.slice_for(c, layer(4, "self_attn.k_proj.bias")), 0, 32, 32);
  expect_slice(p.slice_for(c, layer(5, "self_attn.v_proj.weight")), 0, 32, 32);
  expect_slice(p.slice_for(c, layer(5, "self_attn.v_proj.bias")), 0, 32, 32);
  expect_slice(p.slice_for(c, layer(5, "self_attn.o_proj.weight")), 1, 64, 64);
  expect_slice(p.slice_for(c, layer(3, "mlp.gate_proj.weight")), 0, 128, 128);
  expect_slice(p.slice_for(c, layer(3, "mlp.up_proj.weight")), 0, 128, 128);
  expect_slice(p.slice_for(c, layer(3, "mlp.down_proj.weight")), 1, 128, 128);
  expect_whole(p.slice_for(c, layer(3, "input_layernorm.weight")));
  expect_whole(p.slice_for(c, layer(3, "post_attention_layernorm.weight")));
  expect_whole(p.slice_for(c, "model.norm.weight"));
  expect_slice(p.slice_for(c, "lm_head.weight"), 0, 50646, 50646);

  // Not this stage's: earlier layers, the embedding of an untied model, unknown names.
  EXPECT_FALSE(p.slice_for(c, layer(2, "self_attn.q_proj.weight")));
  EXPECT_FALSE(p.slice_for(c, layer(6, "self_attn.q_proj.weight")));
  EXPECT_FALSE(p.slice_for(c, "model.embed_tokens.weight"));
  EXPECT_FALSE(p.slice_for(c, "model.layers.x.self_attn.q_proj.weight"));
  EXPECT_FALSE(p.slice_for(c, layer(3, "self_attn.rotary_emb.inv_freq")));
}

TEST(ShardPlan, VocabSplitsUnevenlyAndCoversEveryRow) {
  ModelConfig c = tiny(false);
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    ShardPlan p = make_shard_plan(c, {3, 2, {}}, r);
    EXPECT_EQ(p.vocab.begin, covered);
    covered = p.vocab.end;
  }
  EXPECT_EQ(covered, 151936);
  EXPECT_EQ(make_shard_plan(c, {3, 2, {}}, 2).vocab.size(), 50644);
}

TEST(ShardPlan, TiedLmHeadIsServedFromEmbeddingOnLastStage) {
  ModelConfig c = tiny(true);
  ShardPlan first = make_shard_plan(c, {2, 3, {}}, 1);
  ShardPlan middle = make_shard_plan(c, {2, 3, {}}, 3);
  ShardPlan last = make_shard_plan(c, {2, 3, {}}, 5);
  expect_slice(first.slice_for(c, "model.embed_tokens.weight"), 0, 75968, 75968);
  EXPECT_FALSE(middle.slice_for(c, "model.embed_tokens.weight"));
  expect_slice(last.slice_for(c, "model.embed_tokens.weight"), 0, 75968, 75968);
  EXPECT_FALSE(last.slice_for(c, "lm_head.weight"));
  EXPECT_FALSE(first.slice_for(c, "model.norm.weight"));
  EXPECT_FALSE(middle.slice_for(c, "model.norm.weight"));
  expect_whole(last.slice_for(c, "model.norm.weight"));

  ModelConfig u = tiny(false);
  ShardPlan ulast = make_shard_plan(u, {2, 3, {}}, 5);
  EXPECT_FALSE(ulast.slice_for(u, "model.embed_tokens.weight"));
  expect_slice(ulast.slice_for(u, "lm_head.weight"), 0, 75968, 75968);
  EXPECT_FALSE(make_shard_plan(u, {2, 3, {}}, 1).slice_for(u, "lm_head.weight"));
}

TEST(ShardPlan, SingleRankOwnsEverything) {
  ModelConfig c = qwen05b();
  ShardPlan p = make_shard_plan(c, {1, 1, {}}, 0);
  EXPECT_TRUE(p.first_stage);
  EXPECT_TRUE(p.last_stage);
  EXPECT_EQ(p.layers.size(), 24);
  expect_slice(p.slice_for(c, "model.embed_tokens.weight"), 0, 0, 151936);
  expect_slice(p.slice_for(c, layer(23, "self_attn.q_proj.weight")), 0, 0, 896);
  expect_slice(p.slice_for(c, layer(0, "self_attn.k_proj.weight")), 0, 0, 128);
  expect_slice(p.slice_for(c, layer(0, "self_attn.o_proj.weight")), 1, 0, 896);
  expect_slice(p.slice_for(c, layer(0, "mlp.down_proj.weight")), 1, 0, 4864);
  EXPECT_FALSE(p.slice_for(c, "lm_head.weight"));  // tied
}

TEST(ShardPlan, Qwen05BTp2) {
  ModelConfig c = qwen05b();
  ShardPlan p = make_shard_plan(c, {2, 1, {}}, 1);
  EXPECT_EQ(p.q_heads.begin, 7);
  EXPECT_EQ(p.kv_heads.begin, 1);
  expect_slice(p.slice_for(c, layer(0, "self_attn.q_proj.weight")), 0, 448, 448);
  expect_slice(p.slice_for(c, layer(0, "self_attn.v_proj.bias")), 0, 64, 64);
  expect_slice(p.slice_for(c, layer(0, "self_attn.o_proj.weight")), 1, 448, 448);
  expect_slice(p.slice_for(c, layer(0, "mlp.up_proj.weight")), 0, 2432, 2432);
  expect_slice(p.slice_for(c, "model.embed_tokens.weight"), 0, 75968, 75968);
}

TEST(ShardPlan, Qwen7BTp4) {
  ModelConfig c = qwen7b();
  ShardPlan p = make_shard_plan(c, {4, 1, {}}, 3);
  expect_slice(p.slice_for(c, layer(27, "self_attn.q_proj.weight")), 0, 2688, 896);
  expect_slice(p.slice_for(c, layer(27, "self_attn.k_proj.weight")), 0, 384, 128);
  expect_slice(p.slice_for(c, layer(27, "self_attn.o_proj.weight")), 1, 2688, 896);
  expect_slice(p.slice_for(c, layer(27, "mlp.gate_proj.weight")), 0, 14208, 4736);
  expect_slice(p.slice_for(c, layer(27, "mlp.down_proj.weight")), 1, 14208, 4736);
  expect_slice(p.slice_for(c, "lm_head.weight"), 0, 114048, 38016);
  expect_slice(p.slice_for(c, "model.embed_tokens.weight"), 0, 114048, 38016);
}

TEST(ShardPlan, Qwen72BTp2Pp3) {
  ModelConfig c = qwen72b();
  ShardPlan p = make_shard_plan(c, {2, 3, {}}, 5);
  EXPECT_EQ(p.stage, 2);
  EXPECT_EQ(p.layers.begin, 54);
  EXPECT_EQ(p.layers.end, 80);
  EXPECT_EQ(make_shard_plan(c, {2, 3, {}}, 2).layers.begin, 27);
  expect_slice(p.slice_for(c, layer(79, "self_attn.q_proj.weight")), 0, 4096, 4096);
  expect_slice(p.slice_for(c, layer(54, "self_attn.k_proj.weight")), 0, 512, 512);
  expect_slice(p.slice_for(c, layer(54, "mlp.down_proj.weight")), 1, 14784, 14784);
  EXPECT_FALSE(p.slice_for(c, layer(53, "mlp.down_proj.weight")));
}

TEST(ShardPlan, PipelineOverride) {
  ModelConfig c = qwen72b();
  ShardPlan p = make_shard_plan(c, {2, 3, {30, 25, 25}}, 3);
  EXPECT_EQ(p.layers.begin, 30);
  EXPECT_EQ(p.layers.end, 55);
  EXPECT_TRUE(p.slice_for(c, layer(30, "input_layernorm.weight")));
  EXPECT_FALSE(p.slice_for(c, layer(29, "input_layernorm.weight")));
}

TEST(ShardPlan, RankOutsideLayoutIsInternalError) {
  try {
    make_shard_plan(tiny(true), {2, 3, {}}, 6);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Internal);
  }
}

// Every layout of the tiny model on 6 ranks: for each tensor, the ranks of each stage together
// own each element exactly once (split tensors) or each hold it whole (norms).
TEST(ShardPlan, SlicesPartitionEveryTensorForAllLayouts) {
  for (bool tied : {true, false}) {
    ModelConfig c = tiny(tied);
    const std::map<std::string, std::pair<int, int64_t>> split{
        {"self_attn.q_proj.weight", {0, 192}}, {"self_attn.q_proj.bias", {0, 192}},
        {"self_attn.k_proj.weight", {0, 96}},  {"self_attn.v_proj.bias", {0, 96}},
        {"self_attn.o_proj.weight", {1, 192}}, {"mlp.gate_proj.weight", {0, 384}},
        {"mlp.up_proj.weight", {0, 384}},      {"mlp.down_proj.weight", {1, 384}}};
    for (const Layout& l : valid_layouts(c, 6)) {
      std::vector<ShardPlan> plans;
      for (int r = 0; r < 6; ++r) plans.push_back(make_shard_plan(c, l, r));
      for (int li = 0; li < 6; ++li)
        for (const auto& [rest, dim_len] : split) {
          std::vector<int> owners(dim_len.second, 0);
          for (const auto& p : plans)
            if (auto s = p.slice_for(c, layer(li, rest))) {
              EXPECT_EQ(s->dim, dim_len.first);
              for (int64_t i = s->start; i < s->start + s->length; ++i) ++owners[i];
            }
          for (int64_t i = 0; i < dim_len.second; ++i)
            ASSERT_EQ(owners[i], 1) << "tp " << l.tp << " layer " << li << " " << rest << " " << i;
        }
      int64_t embed_rows = 0, head_rows = 0;
      for (const auto& p : plans) {
        if (auto s = p.slice_for(c, "model.embed_tokens.weight")) embed_rows += s->length;
        if (auto s = p.slice_for(c, "lm_head.weight")) head_rows += s->length;
      }
      // Tied with pp > 1: the first and the last stage both hold the embedding rows.
      const int embed_copies = tied && l.pp > 1 ? 2 : 1;
      EXPECT_EQ(embed_rows, embed_copies * c.vocab_size) << "tp " << l.tp;
      EXPECT_EQ(head_rows, tied ? 0 : c.vocab_size) << "tp " << l.tp;
    }
  }
}

}  // namespace
}  // namespace qmpi
