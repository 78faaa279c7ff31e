// The tiny preset shrunk further (hidden 48, 6 query and 2 KV heads, MLP 96) for unit tests that
// build whole models: `layers` decoder layers over a `vocab`-row vocabulary.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "model/presets.h"

namespace qmpi {

inline nlohmann::json small_model_config(int layers, int64_t vocab) {
  nlohmann::json j = preset_config("tiny").raw;
  j["hidden_size"] = 48;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 2;
  j["intermediate_size"] = 96;
  j["vocab_size"] = vocab;
  return j;
}

}  // namespace qmpi
