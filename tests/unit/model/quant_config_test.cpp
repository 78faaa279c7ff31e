#include "model/quant_config.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/config.h"
#include "model/presets.h"

namespace qmpi {
namespace {

using nlohmann::json;

// Qwen2.5-72B-Instruct-AWQ's quantization_config (facts sheet §6).
json awq_72b() {
  return {{"bits", 4},
          {"group_size", 128},
          {"modules_to_not_convert", nullptr},
          {"quant_method", "awq"},
          {"version", "gemm"},
          {"zero_point", true}};
}

// A Qwen GPTQ-Int4 release's, optimum bookkeeping keys included.
json gptq_qwen() {
  return {{"bits", 4},
          {"group_size", 128},
          {"desc_act", false},
          {"sym", true},
          {"damp_percent", 0.01},
          {"true_sequential", true},
          {"quant_method", "gptq"},
          {"use_exllama", false},
          {"model_seqlen", 32768},
          {"exllama_config", {{"version", 1}}}};
}

// Qwen3-*-FP8's quantization_config.
json fp8_qwen() {
  return {{"activation_scheme", "dynamic"},
          {"fmt", "e4m3"},
          {"quant_method", "fp8"},
          {"weight_block_size", {128, 128}}};
}

QuantConfig parse(const json& q) {
  return parse_quant_config({{"quantization_config", q}}, "cfg");
}

Error error_of(const json& q) {
  try {
    parse(q);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << q.dump();
  return Error(Err::Internal, "none");
}

TEST(QuantConfig, AbsentOrNullIsDense) {
  EXPECT_FALSE(parse_quant_config(json::object(), "cfg"));
  EXPECT_FALSE(parse(nullptr));
  EXPECT_EQ(QuantConfig{}.split_unit(), 1);
}

TEST(QuantConfig, QwenAwqRelease) {
  const QuantConfig q = parse(awq_72b());
  EXPECT_EQ(q.method, QuantMethod::Awq);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_FALSE(q.desc_act);
  EXPECT_EQ(q.split_unit(), 128);
  EXPECT_EQ(q.groups(29696), 232);
}

TEST(QuantConfig, QwenGptqReleaseAndActOrder) {
  QuantConfig q = parse(gptq_qwen());
  EXPECT_EQ(q.method, QuantMethod::Gptq);
  EXPECT_TRUE(q.sym);
  EXPECT_FALSE(q.desc_act);
  json j = gptq_qwen();
  j["desc_act"] = true;
  j["sym"] = false;
  j["group_size"] = -1;
  q = parse(j);
  EXPECT_TRUE(q.desc_act);
  EXPECT_FALSE(q.sym);
  EXPECT_EQ(q.groups(896), 1);
  EXPECT_EQ(q.group_rows(896), 896);
  EXPECT_EQ(q.split_unit(), 8);
  j["group_size"] = 128;
  EXPECT_EQ(parse(j).groups(200), 2);  // GPTQ rounds a short last group up
}

TEST(QuantConfig, UnsupportedFormatsNameWhatTheyFound) {
  struct Case {
    json q;
    const char* found;
  };
  std::vector<Case> cases;
  auto with = [](json q, const char* key, json v) {
    q[key] = v;
    return q;
  };
  cases.push_back({with(awq_72b(), "bits", 8), "bits 8"});
  cases.push_back({with(awq_72b(), "version", "gemv"), "\"gemv\""});
  cases.push_back({with(awq_72b(), "version", "exllama"), "\"exllama\""});
  cases.push_back({with(awq_72b(), "zero_point", false), "zero_point false"});
  cases.push_back({with(awq_72b(), "modules_to_not_convert", json::array({"visual"})), "visual"});
  cases.push_back({with(gptq_qwen(), "checkpoint_format", "marlin"), "\"marlin\""});
  cases.push_back({with(gptq_qwen(), "checkpoint_format", "gptq_v2"), "\"gptq_v2\""});
  cases.push_back({with(gptq_qwen(), "is_marlin_format", true), "is_marlin_format"});
  cases.push_back({with(gptq_qwen(), "bits", 3), "bits 3"});
  cases.push_back({with(gptq_qwen(), "group_size", 100), "group_size 100"});
  cases.push_back({with(gptq_qwen(), "quant_method", "exl2"), "\"exl2\""});
  cases.push_back({with(fp8_qwen(), "fmt", "e5m2"), "\"e5m2\""});
  cases.push_back({with(fp8_qwen(), "activation_scheme", "static"), "\"static\""});
  cases.push_back(
      {json{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}, "per-tensor scales"});
  cases.push_back({with(fp8_qwen(), "modules_to_not_convert",
                        json::array({"lm_head", "model.layers.3.mlp.down_proj"})),
                   "model.layers.3.mlp.down_proj"});
  for (const Case& c : cases) {
    const Error e = error_of(c.q);
    EXPECT_EQ(e.code(), Err::QuantUnsupported) << c.q.dump();
    EXPECT_NE(e.message().find(c.found), std::string::npos) << e.message();
  }
  EXPECT_EQ(error_of(with(awq_72b(), "bits", "4")).code(), Err::ConfigInvalid);
  EXPECT_EQ(error_of(json::array()).code(), Err::ConfigInvalid);
  EXPECT_EQ(error_of(with(fp8_qwen(), "weight_block_size", json::array({128}))).code(),
            Err::ConfigInvalid);
}

TEST(QuantConfig, QwenFp8Release) {
  const QuantConfig q = parse(fp8_qwen());
  EXPECT_EQ(q.method, QuantMethod::Fp8);
  EXPECT_TRUE(q.fp8() && !q.int4());
  EXPECT_EQ(q.method_name(), "fp8");
  EXPECT_EQ(q.block_n, 128);
  EXPECT_EQ(q.block_k, 128);
  EXPECT_EQ(q.split_unit(), 128);
  // Routers and lm_head kept in bf16 are what qmpi keeps in float anyway.
  json j = fp8_qwen();
  j["modules_to_not_convert"] = json::array({"lm_head", "model.layers.0.mlp.gate"});
  EXPECT_TRUE(parse(j).fp8());
  // FP8 needs no width check: hidden 192 leaves a partial block.
  json m = preset_config("tiny").raw;
  m["quantization_config"] = fp8_qwen();
  EXPECT_TRUE(ModelConfig::from_json(m, "cfg").quant.fp8());
  // FP8 experts load like any other projection (the router stays bf16).
  json moe = preset_config("tiny-qwen3-moe").raw;
  moe["quantization_config"] = fp8_qwen();
  EXPECT_TRUE(ModelConfig::from_json(moe, "cfg").quant.fp8());
}

TEST(QuantConfig, ModelConfigRefusesBeforeLoading) {
  json j = preset_config("qwen2.5-0.5b").raw;
  j["quantization_config"] = awq_72b();
  const ModelConfig c = ModelConfig::from_json(j, "cfg");
  EXPECT_EQ(c.quant.method, QuantMethod::Awq);
  j["quantization_config"]["group_size"] = 256;  // 896 is 3.5 groups of 256
  try {
    ModelConfig::from_json(j, "cfg");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::QuantUnsupported);
    EXPECT_NE(e.message().find("hidden_size 896"), std::string::npos) << e.message();
  }
}

TEST(QuantConfig, Int4MixtureOfExpertsChecksExpertWidths) {
  json j = preset_config("tiny-qwen3-moe").raw;  // moe_intermediate_size 96
  j["quantization_config"] = awq_72b();
  j["quantization_config"]["group_size"] = 32;
  EXPECT_TRUE(ModelConfig::from_json(j, "cfg").quant.int4());
  j["quantization_config"]["group_size"] = 64;  // 96 is 1.5 AWQ groups of 64
  try {
    ModelConfig::from_json(j, "cfg");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::QuantUnsupported);
    EXPECT_NE(std::string(e.what()).find("moe_intermediate_size 96"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qmpi
