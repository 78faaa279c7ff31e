// The folder side of a synthetic checkpoint, shared by the float and the int4 writers: the
// folder made and cleared of an earlier model's weights before the shards, and after them the
// index (for several shards), config.json and generation_config.json.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"

namespace qmpi {

struct ModelConfig;

// Checks 1 <= shards <= tensors (Error(Usage)), creates `dir` and removes the weights of an
// earlier model there (an old index would win over a new model.safetensors).
void open_synthetic_folder(const std::string& dir, int shards, size_t tensors);

// model.safetensors for one shard; model-0000i-of-0000K.safetensors for shard i-1 of K.
std::string synthetic_shard_name(int shard, int shards);

// Writes the index (shards > 1), config.json and generation_config.json, and adds them to
// summary.files.
void close_synthetic_folder(const std::string& dir, const nlohmann::json& config_json,
                            const ModelConfig& cfg, int shards, uint64_t data_bytes,
                            const std::map<std::string, std::string>& weight_map,
                            CheckpointSummary& summary);

}  // namespace qmpi
