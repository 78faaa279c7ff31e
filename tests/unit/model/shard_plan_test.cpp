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

TEST(CheckLayout, AnyTpUpToTheHeadCountRuns) {
  for (int tp = 1; tp <= 64; ++tp) EXPECT_NO_THROW(check_layout(qwen72b(), {tp, 1, {}})) << tp;
  EXPECT_NO_THROW(check_layout(qwen72b(), {3, 2, {}}));
  EXPECT_NO_THROW(check_layout(qwen05b(), {3, 1, {}}));
  EXPECT_NO_THROW(check_layout(qwen05b(), {14, 1, {}}));
  ModelConfig odd_mlp = tiny(true);
  odd_mlp.intermediate_size = 100;
  EXPECT_NO_THROW(check_layout(odd_mlp, {3, 1, {}}));
}

TEST(CheckLayout, TpLargerThanHeadsSuggestsALayout) {
  Error e = layout_error(qwen05b(), {16, 1, {}});
  EXPECT_EQ(e.code(), Err::TpExceedsHeads);
  EXPECT_NE(e.message().find("--tp 16 is larger than num_attention_heads (14)"), std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("Use --tp 8 --pp 2 for the same 16 ranks"), std::string::npos) << e.fix();
  EXPECT_NE(e.render().find("QM102"), std::string::npos);
  EXPECT_EQ(e.exit_code(), 2);
}

TEST(CheckLayout, TooManyStagesSuggestsMoreTp) {
  Error e = layout_error(tiny(true), {1, 8, {}});
  EXPECT_EQ(e.code(), Err::PipelineLayers);
  EXPECT_NE(e.message().find("--pp 8"), std::string::npos);
  EXPECT_NE(e.message().find("6 layers"), std::string::npos);
  // TP 8 over 12 heads runs (uneven), so it is the first suggestion.
  EXPECT_NE(e.fix().find("Use --tp 8 --pp 1 for the same 8 ranks (also valid: --tp 4 --pp 2, "
                         "--tp 2 --pp 4)."),
            std::string::npos)
      << e.fix();
}

TEST(CheckLayout, NoLayoutForTheRankCount) {
  // 13 ranks: more than the 12 heads as TP, more than the 6 layers as PP.
  Error e = layout_error(tiny(true), {13, 1, {}});
  EXPECT_EQ(e.code(), Err::TpExceedsHeads);
  EXPECT_NE(e.fix().find("No --tp x --pp layout of 13 ranks runs this model"), std::string::npos)
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
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].tp, 6);
  EXPECT_EQ(v[1].tp, 3);
  EXPECT_EQ(v[1].pp, 2);
  EXPECT_EQ(v[2].tp, 2);
  EXPECT_EQ(v[2].pp, 3);
  EXPECT_EQ(v[3].tp, 1);
  EXPECT_EQ(v[3].pp, 6);
  auto t = valid_layouts(tiny(true), 6);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].tp, 6);
  EXPECT_EQ(t[1].tp, 3);
  EXPECT_EQ(t[2].tp, 2);
  EXPECT_EQ(t[3].tp, 1);
  auto seven = valid_layouts(tiny(true), 7);  // 7 stages exceed the 6 layers
  ASSERT_EQ(seven.size(), 1u);
  EXPECT_EQ(seven[0].tp, 7);
  EXPECT_TRUE(valid_layouts(tiny(true), 13).empty());
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
  EXPECT_EQ(p.vocab.begin, 50646);  // 151936 = 50646 + 50645 + 50645
  EXPECT_EQ(p.vocab.end, 101291);

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
  expect_slice(p.slice_for(c, "lm_head.weight"), 0, 50646, 50645);

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
  EXPECT_EQ(make_shard_plan(c, {3, 2, {}}, 2).vocab.size(), 50645);
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

TEST(SplitRange, AsEvenAsPossibleFirstPartsLarger) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 6; ++i) sizes.push_back(split_range(64, 6, i, 1).size());
  EXPECT_EQ(sizes, (std::vector<int64_t>{11, 11, 11, 11, 10, 10}));
  sizes.clear();
  for (int i = 0; i < 4; ++i) sizes.push_back(split_range(14, 4, i, 1).size());
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 3, 3}));
  EXPECT_EQ(split_range(64, 6, 4, 1).begin, 44);
}

TEST(SplitRange, CutsOnWholeUnits) {
  // 29568 MLP columns in groups of 128 (an int4 checkpoint) on 6 ranks: 231 groups, 39 or 38.
  int64_t end = 0;
  for (int i = 0; i < 6; ++i) {
    const Range r = split_range(29568, 6, i, 128);
    EXPECT_EQ(r.begin, end);
    EXPECT_EQ(r.begin % 128, 0);
    EXPECT_EQ(r.size(), (i < 3 ? 39 : 38) * 128) << i;
    end = r.end;
  }
  EXPECT_EQ(end, 29568);
  // A partial last unit: 1000 = 7 x 128 + 104, on 3 parts of 3, 3 and 2 units.
  EXPECT_EQ(split_range(1000, 3, 0, 128).end, 384);
  EXPECT_EQ(split_range(1000, 3, 1, 128).end, 768);
  EXPECT_EQ(split_range(1000, 3, 2, 128).begin, 768);
  EXPECT_EQ(split_range(1000, 3, 2, 128).end, 1000);
}

TEST(ShardPlan, Qwen72BTp6HeadsAndKvCopies) {
  ModelConfig c = qwen72b();
  const std::vector<int64_t> q_sizes{11, 11, 11, 11, 10, 10};
  const std::vector<Range> kv{{0, 2}, {1, 3}, {2, 5}, {4, 6}, {5, 7}, {6, 8}};
  int64_t copies = 0;
  for (int r = 0; r < 6; ++r) {
    ShardPlan p = make_shard_plan(c, {6, 1, {}}, r);
    EXPECT_EQ(p.q_heads.size(), q_sizes[size_t(r)]) << r;
    EXPECT_EQ(p.kv_heads.begin, kv[size_t(r)].begin) << r;
    EXPECT_EQ(p.kv_heads.end, kv[size_t(r)].end) << r;
    EXPECT_EQ(p.intermediate.size(), 4928);
    copies += p.kv_heads.size();
    // Rank 2 has heads 22-32: KV head 2 (22,23), 3 (24-31) and 4 (32).
    if (r == 2) {
      EXPECT_EQ(p.kv_head_of_q, (std::vector<int32_t>{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2}));
      expect_slice(p.slice_for(c, layer(0, "self_attn.k_proj.weight")), 0, 256, 384);
      expect_slice(p.slice_for(c, layer(0, "self_attn.q_proj.weight")), 0, 22 * 128, 11 * 128);
      expect_slice(p.slice_for(c, layer(0, "self_attn.o_proj.weight")), 1, 22 * 128, 11 * 128);
    }
  }
  EXPECT_EQ(copies, 13);
}

TEST(ShardPlan, Qwen7BTp6SplitsTheMlpUnevenly) {
  ModelConfig c = qwen7b();  // 28 heads / 4 KV heads, intermediate 18944 = 6 x 3157 + 2
  std::vector<int64_t> q, im;
  for (int r = 0; r < 6; ++r) {
    ShardPlan p = make_shard_plan(c, {6, 1, {}}, r);
    q.push_back(p.q_heads.size());
    im.push_back(p.intermediate.size());
  }
  EXPECT_EQ(q, (std::vector<int64_t>{5, 5, 5, 5, 4, 4}));
  EXPECT_EQ(im, (std::vector<int64_t>{3158, 3158, 3157, 3157, 3157, 3157}));
  ShardPlan packed = make_shard_plan(c, {6, 1, {}}, 5, 8);
  EXPECT_EQ(packed.intermediate.begin % 8, 0);
  EXPECT_EQ(packed.intermediate.end, 18944);
  EXPECT_EQ(packed.split_unit, 8);
}

// For many head counts and every TP size up to the head count: each query head, MLP column and
// vocab row belongs to exactly one rank, each KV head to at least one, and a rank holds exactly
// the KV heads its query heads read, mapped in order.
TEST(ShardPlan, EveryTpOwnsEachHeadColumnAndRow) {
  struct Shape {
    int64_t heads, kv_heads, intermediate, vocab;
  };
  for (const Shape& s : {Shape{64, 8, 29568, 1000}, Shape{14, 2, 4864, 997},
                         Shape{28, 4, 18944, 1003}, Shape{12, 12, 100, 50}, Shape{8, 1, 77, 31}})
    for (int64_t unit : {int64_t{1}, int64_t{8}})
      for (int tp = 1; tp <= s.heads; ++tp) {
        if (s.intermediate < tp * unit || s.vocab < tp * unit) continue;
        ModelConfig c =
            make_config(s.heads * 4, 2, s.heads, s.kv_heads, 4, s.intermediate, s.vocab, false);
        const int64_t group = s.heads / s.kv_heads;
        std::vector<int> q(size_t(s.heads)), kv(size_t(s.kv_heads)), im(size_t(s.intermediate)),
            vocab(size_t(s.vocab));
        for (int r = 0; r < tp; ++r) {
          ShardPlan p = make_shard_plan(c, {tp, 1, {}}, r, unit);
          ASSERT_EQ(p.kv_head_of_q.size(), size_t(p.q_heads.size()));
          for (int64_t h = p.q_heads.begin; h < p.q_heads.end; ++h) {
            ++q[size_t(h)];
            EXPECT_EQ(p.kv_heads.begin + p.kv_head_of_q[size_t(h - p.q_heads.begin)], h / group);
          }
          EXPECT_EQ(p.kv_heads.begin, p.q_heads.begin / group);
          EXPECT_EQ(p.kv_heads.end, (p.q_heads.end - 1) / group + 1);
          for (int64_t k = p.kv_heads.begin; k < p.kv_heads.end; ++k) ++kv[size_t(k)];
          EXPECT_EQ(p.intermediate.begin % unit, 0);
          for (int64_t i = p.intermediate.begin; i < p.intermediate.end; ++i) ++im[size_t(i)];
          for (int64_t i = p.vocab.begin; i < p.vocab.end; ++i) ++vocab[size_t(i)];
          EXPECT_EQ(p.vocab.size(), p.vocab_of(c, r).size());
          EXPECT_LE(p.vocab.size(), p.max_vocab_rows(c));
        }
        const std::string at = "heads " + std::to_string(s.heads) + " tp " + std::to_string(tp) +
                               " unit " + std::to_string(unit);
        for (int n : q) ASSERT_EQ(n, 1) << at;
        for (int n : kv) ASSERT_GE(n, 1) << at;
        for (int n : im) ASSERT_EQ(n, 1) << at;
        for (int n : vocab) ASSERT_EQ(n, 1) << at;
      }
}

}  // namespace
}  // namespace qmpi
