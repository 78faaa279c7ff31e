// Sizes of Mixture-of-Experts Qwen checkpoints (Qwen2MoeForCausalLM, Qwen3MoeForCausalLM). qmpi
// cannot run them yet — ModelConfig refuses them and the shard plan has no expert split — but
// `qmpi plan` still says how big they are, counted from config.json alone (facts §1b, §2c,
// §2d), so a cluster can be sized before anything is downloaded.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace qmpi {

struct MoeModelSize {
  std::string architecture;
  int64_t num_layers = 0, num_kv_heads = 0, head_dim = 0, num_experts = 0, experts_per_token = 0;
  int64_t params = 0;         // every tensor once (lm_head only when untied)
  int64_t active_params = 0;  // per token: all but the experts not routed to
  uint64_t bf16_bytes = 0;    // 2 bytes per parameter
  uint64_t int4_bytes = 0;    // decoder linears at 133/256 bytes, the rest at 2 (facts §7)
  uint64_t kv_elements_per_token = 0;  // 2 x layers x kv_heads x head_dim
};

// nullopt unless config["architectures"][0] is a Qwen MoE architecture. Throws
// Error(ConfigKeyMissing / ConfigInvalid) naming `source` when a needed key is absent or wrong.
std::optional<MoeModelSize> moe_model_size(const nlohmann::json& config, const std::string& source);

}  // namespace qmpi
