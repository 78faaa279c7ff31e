// adapter_config.json and the --lora-modules options as PEFT and vLLM write them, and each way
// they can be wrong giving its catalogue error.
#include "model/lora_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "../expect_error.h"

namespace qmpi {
namespace {

using nlohmann::json;
using testing::expect_error;

// What PEFT 0.1x writes for a q/v adapter (bookkeeping keys included).
json peft_config() {
  return {{"alpha_pattern", json::object()},
          {"base_model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct"},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"inference_mode", true},
          {"lora_alpha", 16},
          {"lora_dropout", 0.05},
          {"modules_to_save", nullptr},
          {"peft_type", "LORA"},
          {"r", 8},
          {"rank_pattern", json::object()},
          {"target_modules", {"v_proj", "q_proj"}},
          {"task_type", "CAUSAL_LM"},
          {"use_dora", false},
          {"use_rslora", false}};
}

TEST(LoraConfig, ReadsPeftConfigAndScalesByAlphaOverR) {
  const LoraAdapterConfig c = parse_lora_adapter_config(peft_config(), "a.json");
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.alpha, 16.0);
  EXPECT_FALSE(c.rslora);
  EXPECT_EQ(c.targets, (std::vector<std::string>{"v_proj", "q_proj"}));
  EXPECT_TRUE(c.targets_module("q_proj"));
  EXPECT_FALSE(c.targets_module("o_proj"));
  EXPECT_FLOAT_EQ(c.scale(), 2.0f);
}

TEST(LoraConfig, RsLoraScalesByAlphaOverSqrtR) {
  json j = peft_config();
  j["use_rslora"] = true;
  j["r"] = 16;
  EXPECT_FLOAT_EQ(parse_lora_adapter_config(j, "a.json").scale(), 16.0f / 4.0f);
}

TEST(LoraConfig, TargetsByDottedSuffixAllLinearAndDeduplicated) {
  json j = peft_config();
  j["target_modules"] = {"self_attn.o_proj", "mlp.down_proj", "o_proj"};
  EXPECT_EQ(parse_lora_adapter_config(j, "a.json").targets,
            (std::vector<std::string>{"o_proj", "down_proj"}));
  j["target_modules"] = "all-linear";
  EXPECT_EQ(parse_lora_adapter_config(j, "a.json").targets.size(), kLoraModules.size());
}

TEST(LoraConfig, UnknownTargetsAreRefusedByName) {
  json j = peft_config();
  j["target_modules"] = {"q_proj", "lm_head"};
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraModuleUnknown,
               {"a.json", "lm_head"});
  j["target_modules"] = ".*attn.*";
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraModuleUnknown,
               {".*attn.*"});
  j = peft_config();
  j["modules_to_save"] = {"embed_tokens"};
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraModuleUnknown,
               {"modules_to_save"});
}

TEST(LoraConfig, BiasOtherThanNoneAndDoraAreRefused) {
  json j = peft_config();
  j["bias"] = "lora_only";
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraConfigUnsupported,
               {"lora_only"});
  j = peft_config();
  j["use_dora"] = true;
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraConfigUnsupported,
               {"use_dora"});
  j = peft_config();
  j["rank_pattern"] = {{"q_proj", 4}};
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraConfigUnsupported,
               {"rank_pattern"});
}

TEST(LoraConfig, MissingOrBadRankIsUnreadable) {
  json j = peft_config();
  j.erase("r");
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraAdapterUnreadable,
               {"\"r\""});
  j = peft_config();
  j["r"] = 0;
  expect_error([&] { parse_lora_adapter_config(j, "a.json"); }, Err::LoraAdapterUnreadable,
               {"positive"});
  expect_error([] { read_lora_adapter_config("/nonexistent/adapter"); }, Err::LoraAdapterUnreadable,
               {"/nonexistent/adapter"});
}

TEST(LoraOptions, ParsesNameEqualsDirAndVllmJson) {
  LoraModule m = parse_lora_module("sql=/adapters/sql=v2");
  EXPECT_EQ(m.name, "sql");
  EXPECT_EQ(m.path, "/adapters/sql=v2");
  m = parse_lora_module(R"({"name": "chat", "path": "/a/chat", "base_model_name": "x"})");
  EXPECT_EQ(m.name, "chat");
  EXPECT_EQ(m.path, "/a/chat");
  expect_error([] { parse_lora_module("sql"); }, Err::LoraOptionInvalid, {"NAME=DIR"});
  expect_error([] { parse_lora_module("=/a"); }, Err::LoraOptionInvalid, {"empty"});
  expect_error([] { parse_lora_module(R"({"name": "x"})"); }, Err::LoraOptionInvalid, {"path"});
}

TEST(LoraOptions, ChecksCountNamesAndIndexes) {
  LoraOptions o;
  o.modules = {{"a", "/a"}, {"b", "/b"}};
  expect_error([&] { check_lora_options(o, {"base"}); }, Err::LoraTooMany, {"2", "--max-loras 1"});
  o.max_loras = 2;
  check_lora_options(o, {"base"});
  EXPECT_EQ(lora_index(o, "b"), 1);
  EXPECT_EQ(lora_index(o, "base"), -1);
  expect_error(
      [&] {
        check_lora_options(o, {"base", "a"});
      },
      Err::LoraOptionInvalid, {"\"a\"", "base model"});
  o.modules.push_back({"a", "/c"});
  o.max_loras = 3;
  expect_error([&] { check_lora_options(o, {"base"}); }, Err::LoraOptionInvalid, {"twice"});
}

}  // namespace
}  // namespace qmpi
