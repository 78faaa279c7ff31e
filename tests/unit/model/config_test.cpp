#include "model/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"
#include "core/errors.h"
#include "model/presets.h"

namespace qmpi {
namespace {

using nlohmann::json;
using testing::TempDir;

// Qwen2.5-0.5B-Instruct's config.json as shipped (facts sheet §1).
json qwen05_json() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

Error error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error raised";
  return Error(Err::Internal, "none");
}

int64_t param_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const auto& t : expected_tensors(c)) {
    int64_t m = 1;
    for (int64_t d : t.shape) m *= d;
    n += m;
  }
  return n;
}

TEST(ModelConfig, ParsesQwen25_05B) {
  const ModelConfig c = ModelConfig::from_json(qwen05_json(), "config.json");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // no key: hidden / heads
  EXPECT_EQ(c.q_width(), 896);
  EXPECT_EQ(c.kv_width(), 128);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.torch_dtype, DType::BF16);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(c.raw["sliding_window"], 32768);
  // 494,032,768 parameters: the published size of Qwen2.5-0.5B.
  EXPECT_EQ(param_count(c), 494032768);
}

TEST(ModelConfig, OptionalKeysAndForms) {
  json j = qwen05_json();
  j.erase("tie_word_embeddings");
  j["eos_token_id"] = {151645, 151643};
  j["torch_dtype"] = "float32";
  j["head_dim"] = 32;
  ModelConfig c = ModelConfig::from_json(j, "x");
  EXPECT_FALSE(c.tie_word_embeddings);  // HF's Qwen2Config default
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(c.torch_dtype, DType::F32);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.q_width(), 14 * 32);
  j.erase("torch_dtype");
  j["dtype"] = "float16";  // newer transformers spelling
  EXPECT_EQ(ModelConfig::from_json(j, "x").torch_dtype, DType::F16);
}

TEST(ModelConfig, TransformersFiveRopeParameters) {
  // transformers 5 moves rope_theta and the scaling fields into one "rope_parameters" object.
  json j = qwen05_json();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  ModelConfig c = ModelConfig::from_json(j, "x");
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_scaling.kind, RopeKind::Default);

  j["rope_parameters"] = {{"rope_type", "yarn"},
                          {"rope_theta", 1e6},
                          {"factor", 4.0},
                          {"original_max_position_embeddings", 32768}};
  c = ModelConfig::from_json(j, "x");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.kind, RopeKind::Yarn);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // disagrees with rope_parameters
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "x"); }).code(), Err::ConfigInvalid);
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "x"); }).code(), Err::ArchUnsupported);
  j["rope_parameters"] = "yarn";
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "x"); }).code(), Err::ConfigInvalid);
}

TEST(ModelConfig, MissingKeyNamesKeyAndFile) {
  for (const char* key : {"architectures", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "intermediate_size",
                          "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta"}) {
    json j = qwen05_json();
    j.erase(key);
    const Error e = error_of([&] { ModelConfig::from_json(j, "/models/q/config.json"); });
    EXPECT_EQ(e.code(), Err::ConfigKeyMissing) << key;
    EXPECT_NE(e.message().find(key), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("/models/q/config.json"), std::string::npos) << e.message();
  }
}

TEST(ModelConfig, UnsupportedArchitecture) {
  json j = qwen05_json();
  j["architectures"] = {"LlamaForCausalLM"};
  const Error e = error_of([&] { ModelConfig::from_json(j, "c.json"); });
  EXPECT_EQ(e.code(), Err::ArchUnsupported);
  EXPECT_NE(e.message().find("not supported yet: LlamaForCausalLM"), std::string::npos);
  // The message names what does run.
  EXPECT_NE(e.message().find("Qwen3MoeForCausalLM"), std::string::npos);
  j = qwen05_json();
  j["rope_scaling"] = {{"type", "longrope"}, {"factor", 4.0}};
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c.json"); }).code(), Err::ArchUnsupported);
  j = qwen05_json();
  j["use_sliding_window"] = true;
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c.json"); }).code(), Err::ArchUnsupported);
}

TEST(ModelConfig, InvalidValues) {
  json j = qwen05_json();
  j["num_key_value_heads"] = 3;  // 14 heads are not a multiple of 3
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c"); }).code(), Err::ConfigInvalid);
  j = qwen05_json();
  j["hidden_size"] = "896";
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c"); }).code(), Err::ConfigInvalid);
  j = qwen05_json();
  j["tie_word_embeddings"] = "yes";
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c"); }).code(), Err::ConfigInvalid);
  j = qwen05_json();
  j["use_sliding_window"] = nullptr;  // null means the default (false)
  EXPECT_NO_THROW(ModelConfig::from_json(j, "c"));
  j = qwen05_json();
  j["torch_dtype"] = "int8";
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(j, "c"); }).code(), Err::DTypeUnsupported);
}

TEST(ModelConfig, AbsurdSizesAreRefusedAtOnce) {
  // Each once made the planner list billions of tensors; now a QM201 naming the field.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"num_hidden_layers", 1000000000},
                                                 {"hidden_size", int64_t(1) << 40},
                                                 {"vocab_size", int64_t(1) << 31},
                                                 {"intermediate_size", int64_t(1) << 33},
                                                 {"max_position_embeddings", int64_t(1) << 40}}) {
    json j = qwen05_json();
    j[key] = value;
    const Error e = error_of([&] { ModelConfig::from_json(j, "c"); });
    EXPECT_EQ(e.code(), Err::ConfigInvalid) << key;
    EXPECT_NE(e.message().find(key), std::string::npos) << e.message();
  }
  json moe = preset_config("tiny-qwen3-moe").raw;
  moe["num_experts"] = int64_t(1) << 31;
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(moe, "c"); }).code(), Err::ConfigInvalid);
  moe = preset_config("tiny-qwen3-moe").raw;
  moe["num_experts"] = 4096;
  moe["num_hidden_layers"] = 1000;  // each within its bound, 4 million experts in all
  const Error all = error_of([&] { ModelConfig::from_json(moe, "c"); });
  EXPECT_EQ(all.code(), Err::ConfigInvalid);
  EXPECT_NE(all.message().find("experts in all"), std::string::npos) << all.message();
}

TEST(ModelConfig, LoadFromFolder) {
  TempDir dir;
  EXPECT_EQ(error_of([&] { ModelConfig::load(dir.file("absent")); }).code(), Err::ModelDirMissing);
  std::ofstream(dir.file("m.h5")) << "not hdf5";  // .h5 files are read as qmpi checkpoints
  EXPECT_EQ(error_of([&] { ModelConfig::load(dir.file("m.h5")); }).code(), Err::H5Format);
  const Error none = error_of([&] { ModelConfig::load(dir.str()); });
  EXPECT_EQ(none.code(), Err::ConfigInvalid);
  EXPECT_NE(none.message().find("config.json"), std::string::npos);
  std::ofstream(dir.file("config.json")) << "{\"architectures\": [";
  EXPECT_EQ(error_of([&] { ModelConfig::load(dir.str()); }).code(), Err::ConfigInvalid);
  std::ofstream(dir.file("config.json")) << qwen05_json().dump();
  EXPECT_EQ(ModelConfig::load(dir.str()).hidden_size, 896);
  EXPECT_EQ(ModelConfig::load(dir.file("config.json")).num_layers, 24);
}

TEST(ExpectedTensors, NamesShapesAndTying) {
  json j = qwen05_json();
  ModelConfig tied = ModelConfig::from_json(j, "c");
  auto t = expected_tensors(tied);
  ASSERT_EQ(t.size(), size_t(1 + 24 * 12 + 1));
  EXPECT_EQ(t.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(t.front().shape, (std::vector<int64_t>{151936, 896}));
  EXPECT_EQ(t.back().name, "model.norm.weight");
  auto find = [&](const std::string& n) {
    for (const auto& s : t)
      if (s.name == n) return s.shape;
    ADD_FAILURE() << n;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(find("model.layers.23.self_attn.k_proj.weight"), (std::vector<int64_t>{128, 896}));
  EXPECT_EQ(find("model.layers.0.self_attn.k_proj.bias"), (std::vector<int64_t>{128}));
  EXPECT_EQ(find("model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{896, 896}));
  EXPECT_EQ(find("model.layers.5.mlp.down_proj.weight"), (std::vector<int64_t>{896, 4864}));
  EXPECT_EQ(find("model.layers.5.post_attention_layernorm.weight"), (std::vector<int64_t>{896}));
  j["tie_word_embeddings"] = false;
  t = expected_tensors(ModelConfig::from_json(j, "c"));
  EXPECT_EQ(t.back().name, "lm_head.weight");
  EXPECT_EQ(t.back().shape, (std::vector<int64_t>{151936, 896}));
}

TEST(GenerationConfig, ReadsFileOrFallsBack) {
  TempDir dir;
  const ModelConfig c = ModelConfig::from_json(qwen05_json(), "c");
  GenerationConfig g = GenerationConfig::load(dir.str(), c);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_FALSE(g.do_sample);
  std::ofstream(dir.file("generation_config.json"))
      << R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
            "pad_token_id": 151643, "repetition_penalty": 1.05, "temperature": 0.7,
            "top_k": 20, "top_p": 0.8})";
  g = GenerationConfig::load(dir.str(), c);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_DOUBLE_EQ(g.temperature, 0.7);
  EXPECT_DOUBLE_EQ(g.top_p, 0.8);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.05);
  EXPECT_TRUE(g.do_sample);
  std::ofstream(dir.file("generation_config.json")) << "{";
  EXPECT_EQ(error_of([&] { GenerationConfig::load(dir.str(), c); }).code(), Err::ConfigInvalid);
}

TEST(Presets, TinySplitsOverTheLayoutsTestsUse) {
  const ModelConfig t = preset_config("tiny");
  EXPECT_EQ(t.hidden_size, 192);
  EXPECT_EQ(t.num_layers, 6);
  EXPECT_EQ(t.head_dim, 16);
  EXPECT_EQ(t.vocab_size, 151936);
  EXPECT_TRUE(t.tie_word_embeddings);
  EXPECT_EQ(t.eos_token_ids, (std::vector<int64_t>{151645}));
  for (int tp : {1, 2, 3, 6}) {
    EXPECT_EQ(t.num_heads % tp, 0) << tp;
    EXPECT_EQ(t.num_kv_heads % tp, 0) << tp;
    EXPECT_EQ(t.intermediate_size % tp, 0) << tp;
  }
  for (int pp : {1, 2, 3}) EXPECT_EQ(t.num_layers % pp, 0) << pp;
  // The preset's config.json parses back to itself.
  EXPECT_EQ(ModelConfig::from_json(t.raw, "tiny").intermediate_size, 384);
}

TEST(Presets, Qwen05BAndLike) {
  const ModelConfig p = preset_config("qwen2.5-0.5b");
  EXPECT_EQ(param_count(p), 494032768);
  EXPECT_EQ(p.raw["max_window_layers"], 21);
  EXPECT_EQ(error_of([] { preset_config("huge"); }).code(), Err::Usage);

  TempDir dir;
  json j = qwen05_json();
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  std::ofstream(dir.file("config.json")) << j.dump();
  const ModelConfig like = config_like(dir.file("config.json"));
  EXPECT_EQ(like.intermediate_size, 4864);
  EXPECT_FALSE(like.raw.contains("quantization_config"));
  EXPECT_EQ(like.raw["transformers_version"], "4.43.1");
}

}  // namespace
}  // namespace qmpi
