// config.json of a Hugging Face Qwen checkpoint, parsed and checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/config_overrides.h"
#include "model/quant_config.h"
#include "model/rope_scaling.h"

namespace qmpi {

// The Mixture-of-Experts fields of Qwen2-MoE / Qwen3-MoE (facts §1b, §2c).
struct MoeConfig {
  int64_t num_experts = 0;  // 0: a dense model
  int64_t experts_per_token = 0;
  int64_t intermediate_size = 0;         // each expert's SwiGLU width (moe_intermediate_size)
  int64_t shared_intermediate_size = 0;  // Qwen2-MoE's shared expert; 0: none
  bool norm_topk_prob = false;           // renormalise the k routing weights to sum to 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;  // layers that keep the dense MLP
};

struct ModelConfig {
  std::string architecture;  // "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen2MoeForCausalLM"...
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
  RopeScaling rope_scaling;  // none unless config.json's rope_scaling asks
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = true;  // Qwen2, Qwen2-MoE (Qwen3: attention_bias, false in every release)
  bool qk_norm = false;  // Qwen3, Qwen3-MoE: RMSNorm per head on q and k before RoPE
  MoeConfig moe;         // num_experts 0 on dense models
  DType torch_dtype = DType::BF16;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  QuantConfig quant;  // int4 AWQ/GPTQ or block-wise FP8 decoder linears, or none
  nlohmann::json raw;

  int64_t q_width() const { return num_heads * head_dim; }
  // True when decoder layer `layer` has a sparse MoE block instead of the dense MLP.
  bool is_moe_layer(int64_t layer) const;
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  // The context vLLM derives from the config: max_position_embeddings, times rope_scaling's
  // factor (YaRN: original_max_position_embeddings times it).
  int64_t derived_max_model_len() const {
    return rope_scaling.derived_max_len(max_position_embeddings);
  }

  // Throws Error(ConfigKeyMissing / ArchUnsupported / ConfigInvalid) naming `source`.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  // Reads <model_dir>/config.json (or the config stored in a qmpi .h5 file), with the command
  // line's overrides applied.
  static ModelConfig load(const std::string& model_path, const ConfigOverrides& overrides = {});
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
