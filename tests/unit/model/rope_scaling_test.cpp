#include "model/rope_scaling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "model/batch.h"
#include "model/config.h"

namespace qmpi {
namespace {

using nlohmann::json;

RopeScaling parse(const json& j, int64_t max_pos = 64) {
  return RopeScaling::parse(j, max_pos, "config.json");
}

Error error_of(const json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << j.dump();
  return Error(Err::Internal, "none");
}

bool mentions(const Error& e, const std::string& what) {
  return e.message().find(what) != std::string::npos;
}

TEST(RopeScaling, QwenModelCardYarnKeepsItsFactor) {
  // The Qwen2.5 model cards' snippet on a config whose max_position_embeddings is 32768.
  const RopeScaling s = parse(
      json{{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}, 32768);
  EXPECT_EQ(s.kind, RopeKind::Yarn);
  EXPECT_EQ(s.factor, 4.0);
  EXPECT_EQ(s.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(s.attention_factor, 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(s.beta_fast, 32.0);
  EXPECT_EQ(s.beta_slow, 1.0);
  EXPECT_EQ(s.derived_max_len(32768), 131072);
}

TEST(RopeScaling, BothSpellingsAndTheOptionalFields) {
  EXPECT_EQ(parse(json{{"rope_type", "linear"}, {"factor", 2.0}}).kind, RopeKind::Linear);
  EXPECT_EQ(parse(json{{"type", "dynamic"}, {"factor", 2.0}}).kind, RopeKind::Dynamic);
  EXPECT_EQ(parse(json{{"type", "yarn"}, {"rope_type", "yarn"}, {"factor", 2.0}}).kind,
            RopeKind::Yarn);
  EXPECT_EQ(parse(json(nullptr)).kind, RopeKind::Default);
  EXPECT_EQ(parse(json{{"rope_type", "default"}}).derived_max_len(64), 64);
  EXPECT_EQ(parse(json{{"type", "linear"}, {"factor", 4.0}}).derived_max_len(64), 256);
  const RopeScaling given = parse(json{{"type", "yarn"},
                                       {"factor", 4.0},
                                       {"attention_factor", 0.5},
                                       {"beta_fast", 16},
                                       {"beta_slow", 2},
                                       {"truncate", false}});
  EXPECT_EQ(given.attention_factor, 0.5);
  EXPECT_EQ(given.beta_fast, 16.0);
  EXPECT_EQ(given.beta_slow, 2.0);
  EXPECT_FALSE(given.truncate);
  // DeepSeek-style mscale pair: the ratio of the two multipliers.
  const RopeScaling ms =
      parse(json{{"type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 0.5}});
  EXPECT_DOUBLE_EQ(ms.attention_factor,
                   (0.1 * std::log(40.0) + 1.0) / (0.05 * std::log(40.0) + 1.0));
  // No factor: transformers' max_position_embeddings / original_max_position_embeddings.
  EXPECT_EQ(parse(json{{"type", "yarn"}, {"original_max_position_embeddings", 16}}).factor, 4.0);
}

TEST(RopeScaling, RefusesWhatItDoesNotRunNamingIt) {
  Error e = error_of(json{{"type", "longrope"}, {"factor", 4.0}});
  EXPECT_EQ(e.code(), Err::ArchUnsupported);
  EXPECT_TRUE(mentions(e, "\"longrope\"")) << e.message();
  e = error_of(json{{"type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1}});
  EXPECT_EQ(e.code(), Err::ArchUnsupported);
  EXPECT_TRUE(mentions(e, "\"low_freq_factor\"")) << e.message();
  e = error_of(json{{"type", "linear"}, {"factor", 4.0}, {"beta_fast", 32}});
  EXPECT_TRUE(mentions(e, "\"beta_fast\"")) << e.message();  // a YaRN field on linear
  e = error_of(json{{"type", "linear"}, {"factor", 0.5}});
  EXPECT_EQ(e.code(), Err::ConfigInvalid);
  EXPECT_TRUE(mentions(e, "\"factor\"")) << e.message();
  e = error_of(json{{"type", "linear"}, {"rope_type", "yarn"}, {"factor", 2.0}});
  EXPECT_EQ(e.code(), Err::ConfigInvalid);
  EXPECT_EQ(error_of(json{{"type", "dynamic"}}).code(), Err::ConfigKeyMissing);
  EXPECT_EQ(error_of(json{{"factor", 2.0}}).code(), Err::ConfigKeyMissing);
  EXPECT_EQ(error_of(json{{"type", "yarn"}, {"factor", 2.0}, {"truncate", 1}}).code(),
            Err::ConfigInvalid);
  EXPECT_EQ(error_of(json::array()).code(), Err::ConfigInvalid);
}

// head_dim 16, theta 1e4, 64 original tokens: pair m turns 64 / (2 pi 1e4^(m / 8)) times, so
// beta_slow (1 turn) sits at m = 2.02 (ceil 3) and beta_fast (32) below pair 0: the ratio to the
// plain frequency ramps from 1 at pair 0 to 1 / factor from pair 3 on.
TEST(RopeInvFreq, YarnLinearAndDynamicByHand) {
  const std::vector<float> plain = rope_inv_freq(1e4, 16, RopeScaling{}, 64, 0);
  for (int m = 0; m < 8; ++m)
    EXPECT_FLOAT_EQ(plain[size_t(m)], float(1.0 / std::pow(1e4, m / 8.0)));
  const RopeScaling yarn =
      parse(json{{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}});
  const std::vector<float> y = rope_inv_freq(1e4, 16, yarn, 64, 0);
  for (int m = 0; m < 8; ++m) {
    const double ramp = std::min(m / 3.0, 1.0);
    EXPECT_NEAR(y[size_t(m)] / plain[size_t(m)], (1 - ramp) + ramp / 4, 1e-6) << m;
  }
  const std::vector<float> lin =
      rope_inv_freq(1e4, 16, parse(json{{"type", "linear"}, {"factor", 4.0}}), 64, 0);
  for (int m = 0; m < 8; ++m) EXPECT_FLOAT_EQ(lin[size_t(m)], plain[size_t(m)] / 4);
  const RopeScaling dyn = parse(json{{"type", "dynamic"}, {"factor", 2.0}});
  EXPECT_EQ(rope_inv_freq(1e4, 16, dyn, 64, 64), plain);  // not past max_position_embeddings
  const std::vector<float> d192 = rope_inv_freq(1e4, 16, dyn, 64, 192);
  const double base = 1e4 * std::pow(2.0 * 3 - 1, 16.0 / 14.0);
  for (int m = 0; m < 8; ++m)
    EXPECT_NEAR(d192[size_t(m)], 1.0 / std::pow(base, m / 8.0), 1e-6 * plain[size_t(m)]) << m;
}

ModelConfig tiny_config(const json& rope_scaling) {
  return ModelConfig::from_json(json{{"architectures", {"Qwen2ForCausalLM"}},
                                     {"hidden_size", 32},
                                     {"num_hidden_layers", 1},
                                     {"num_attention_heads", 2},
                                     {"num_key_value_heads", 1},
                                     {"intermediate_size", 8},
                                     {"vocab_size", 16},
                                     {"max_position_embeddings", 64},
                                     {"rope_theta", 1e4},
                                     {"rms_norm_eps", 1e-6},
                                     {"rope_scaling", rope_scaling}},
                                "config.json");
}

TEST(RotaryFrequencies, DynamicGivesEachSequenceItsOwnLength) {
  const ModelConfig cfg = tiny_config(json{{"type", "dynamic"}, {"factor", 2.0}});
  RotaryFrequencies rope(cfg);
  BatchInput b;
  b.tokens = {1, 2, 3, 4};
  // A 3-token chunk ending at 100 tokens and one decode token at 40: only the first is past 64.
  b.seqs = {AttentionSeq{0, 3, 100, 0}, AttentionSeq{3, 1, 40, 0}};
  const RopeFreqs f = rope.of(b);
  ASSERT_EQ(f.rows, 4);
  EXPECT_EQ(f.head_dim, 16);
  EXPECT_EQ(f.attention, 1.0f);
  const std::vector<float> at100 = rope_inv_freq(1e4, 16, cfg.rope_scaling, 64, 100);
  const std::vector<float> plain = rope_inv_freq(1e4, 16, cfg.rope_scaling, 64, 0);
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(std::vector<float>(f.inv_freq + t * 8, f.inv_freq + t * 8 + 8), t < 3 ? at100 : plain)
        << t;
  b.seqs = {AttentionSeq{0, 3, 50, 0}, AttentionSeq{3, 1, 40, 0}};  // none past 64: one row
  EXPECT_EQ(rope.of(b).rows, 1);
  const ModelConfig yarn = tiny_config(json{{"type", "yarn"}, {"factor", 4.0}});
  RotaryFrequencies yarn_rope(yarn);
  const RopeFreqs y = yarn_rope.of(b);
  EXPECT_EQ(y.rows, 1);
  EXPECT_FLOAT_EQ(y.attention, float(0.1 * std::log(4.0) + 1.0));
}

}  // namespace
}  // namespace qmpi
