// config.json of a Hugging Face Qwen checkpoint, parsed and checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/quant_config.h"

namespace qmpi {

struct ModelConfig {
  std::string architecture;  // "Qwen2ForCausalLM"
  std::string model_type;    // "qwen2"
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // hidden/heads for Qwen2 (no key in config); explicit for Qwen3
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;  // embedding rows (>= tokenizer size)
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = true;
  bool qk_norm = false;  // Qwen3 (later)
  DType torch_dtype = DType::BF16;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  QuantConfig quant;  // int4 AWQ/GPTQ decoder linears, or none
  nlohmann::json raw;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }

  // Throws Error(ConfigKeyMissing / ArchUnsupported / ConfigInvalid) naming `source`.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  // Reads <model_dir>/config.json (or the config stored in a qmpi .h5 file).
  static ModelConfig load(const std::string& model_path);
};

// Every tensor the config implies, with its Hugging Face name and shape, in checkpoint order
// (embedding, layers, final norm, lm_head when untied). Used by the loader's checks, doctor,
// the planner and the synthetic-weight generator.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg);

// Sampling defaults and stop ids from generation_config.json (absent file: neutral defaults).
struct GenerationConfig {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = -1;
  double repetition_penalty = 1.0;
  bool do_sample = false;
  std::vector<int64_t> eos_token_ids;

  static GenerationConfig load(const std::string& model_path, const ModelConfig& config);
};

}  // namespace qmpi
