#include "model/presets.h"

#include "core/errors.h"

namespace qmpi {
namespace {

struct Shape {
  int64_t hidden, layers, heads, kv_heads, intermediate, vocab, max_pos, sliding_window;
  bool tied;
};

// Keys and values as transformers writes them for Qwen2 (Qwen2Config.to_dict()).
nlohmann::json qwen2_config_json(const Shape& s) {
  return {
      {"architectures", nlohmann::json::array({"Qwen2ForCausalLM"})},
      {"attention_dropout", 0.0},
      {"bos_token_id", 151643},
      {"eos_token_id", 151645},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.intermediate},
      {"max_position_embeddings", s.max_pos},
      {"max_window_layers", s.layers},
      {"model_type", "qwen2"},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"rms_norm_eps", 1e-6},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000.0},
      {"sliding_window", s.sliding_window},
      {"tie_word_embeddings", s.tied},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", s.vocab},
  };
}

// Qwen3 as transformers writes it: an explicit head_dim, no biases, q/k norms (facts §1a).
nlohmann::json qwen3_config_json(const Shape& s, int64_t head_dim) {
  nlohmann::json j = qwen2_config_json(s);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["head_dim"] = head_dim;
  j["attention_bias"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = s.layers;
  return j;
}

struct MoeShape {
  int64_t experts, top_k, moe_intermediate, shared_intermediate, sparse_step;
  bool norm_topk;
  std::vector<int64_t> mlp_only;
};

nlohmann::json add_moe(nlohmann::json j, const MoeShape& m) {
  j["num_experts"] = m.experts;
  j["num_experts_per_tok"] = m.top_k;
  j["moe_intermediate_size"] = m.moe_intermediate;
  j["norm_topk_prob"] = m.norm_topk;
  j["decoder_sparse_step"] = m.sparse_step;
  j["mlp_only_layers"] = m.mlp_only;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.001;
  if (m.shared_intermediate > 0) j["shared_expert_intermediate_size"] = m.shared_intermediate;
  return j;
}

nlohmann::json qwen2_moe_config_json(const Shape& s, const MoeShape& m) {
  nlohmann::json j = add_moe(qwen2_config_json(s), m);
  j["architectures"] = {"Qwen2MoeForCausalLM"};
  j["model_type"] = "qwen2_moe";
  j["qkv_bias"] = true;
  return j;
}

nlohmann::json qwen3_moe_config_json(const Shape& s, int64_t head_dim, const MoeShape& m) {
  nlohmann::json j = add_moe(qwen3_config_json(s, head_dim), m);
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  return j;
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"tiny",       "qwen2.5-0.5b", "tiny-qwen3",    "tiny-qwen2-moe", "tiny-qwen3-moe",
          "qwen3-0.6b", "qwen3-1.7b",   "qwen3-30b-a3b", "qwen3-moe-bench"};
}

ModelConfig preset_config(const std::string& name) {
  nlohmann::json j;
  if (name == "tiny") {
    j = qwen2_config_json({192, 6, 12, 6, 384, 151936, 4096, 4096, true});
  } else if (name == "qwen2.5-0.5b") {
    j = qwen2_config_json({896, 24, 14, 2, 4864, 151936, 32768, 32768, true});
    j["max_window_layers"] = 21;
  } else if (name == "tiny-qwen3") {
    // head_dim 32 x 12 heads = 384 != hidden 192, as on Qwen3-0.6B.
    j = qwen3_config_json({192, 6, 12, 6, 384, 151936, 4096, 0, true}, 32);
  } else if (name == "tiny-qwen2-moe") {
    // 8 experts (uneven over TP 3), top 2 without renormalisation, a shared expert, and layer 2
    // kept dense through mlp_only_layers.
    j = qwen2_moe_config_json({192, 6, 12, 6, 384, 151936, 4096, 4096, true},
                              {8, 2, 64, 256, 1, false, {2}});
  } else if (name == "tiny-qwen3-moe") {
    // 7 experts, top 3 renormalised; decoder_sparse_step 2 makes layers 1, 3, 5 sparse.
    j = qwen3_moe_config_json({192, 6, 12, 6, 384, 151936, 4096, 0, true}, 32,
                              {7, 3, 96, 0, 2, true, {}});
  } else if (name == "qwen3-0.6b") {
    j = qwen3_config_json({1024, 28, 16, 8, 3072, 151936, 40960, 0, true}, 128);
  } else if (name == "qwen3-1.7b") {
    j = qwen3_config_json({2048, 28, 16, 8, 6144, 151936, 40960, 0, true}, 128);
  } else if (name == "qwen3-30b-a3b") {
    j = qwen3_moe_config_json({2048, 48, 32, 4, 6144, 151936, 40960, 0, false}, 128,
                              {128, 8, 768, 0, 1, true, {}});
  } else if (name == "qwen3-moe-bench") {
    // Qwen3-30B-A3B's layer shape scaled down to fit a loaded dev box: 8 layers, 64 experts.
    j = qwen3_moe_config_json({2048, 8, 32, 4, 6144, 151936, 40960, 0, false}, 128,
                              {64, 8, 768, 0, 1, true, {}});
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    raise(Err::Usage, "unknown preset '" + name + "'",
          "Use --preset with one of " + names + ", or --like PATH/config.json.");
  }
  return ModelConfig::from_json(j, "preset " + name);
}

ModelConfig config_like(const std::string& config_path) {
  ModelConfig c = ModelConfig::load(config_path);
  c.raw.erase("quantization_config");
  return c;
}

}  // namespace qmpi
