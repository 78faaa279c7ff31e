// What the `qmpi doctor --model` tests share: a tiny Qwen2 config and a findings printout for
// failure messages.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "doctor/model_checks.h"

namespace qmpi::doctor::fixtures {

// Two layers of width 32: small enough to write in milliseconds, with GQA (4 heads, 2 KV).
inline nlohmann::json small_config() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", "qwen2"},
          {"hidden_size", 32},
          {"intermediate_size", 64},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 512},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", "bfloat16"}};
}

// One line per finding: status, code, message.
inline std::string dump(const ModelCheck& r) {
  std::string s;
  for (const Finding& f : r.findings)
    s += std::string(status_name(f.status)) + " " + (f.code ? error_id(*f.code) : "") + " " +
         f.message + "\n";
  return s;
}

}  // namespace qmpi::doctor::fixtures
