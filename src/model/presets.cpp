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

}  // namespace

std::vector<std::string> preset_names() {
  return {"tiny", "qwen2.5-0.5b"};
}

ModelConfig preset_config(const std::string& name) {
  nlohmann::json j;
  if (name == "tiny") {
    j = qwen2_config_json({192, 6, 12, 6, 384, 151936, 4096, 4096, true});
  } else if (name == "qwen2.5-0.5b") {
    j = qwen2_config_json({896, 24, 14, 2, 4864, 151936, 32768, 32768, true});
    j["max_window_layers"] = 21;
  } else {
    raise(Err::Usage, "unknown preset '" + name + "'",
          "Use --preset tiny or --preset qwen2.5-0.5b, or --like PATH/config.json.");
  }
  return ModelConfig::from_json(j, "preset " + name);
}

ModelConfig config_like(const std::string& config_path) {
  ModelConfig c = ModelConfig::load(config_path);
  c.raw.erase("quantization_config");
  return c;
}

}  // namespace qmpi
