// Writes a random-weight model in the exact Hugging Face layout (config.json,
// generation_config.json, model.safetensors or shards + index) from SyntheticTensor values,
// tensor by tensor in bounded memory. Tokenizer files are the caller's business.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace qmpi {

struct CheckpointSummary {
  int64_t params = 0;
  uint64_t file_bytes = 0;         // sum of the safetensors file sizes
  std::vector<std::string> files;  // every file written, in `dir`
};

// `config_json` is a Qwen2 config.json object; its torch_dtype is set to `dtype`. shards == 1
// writes model.safetensors without an index; K > 1 writes model-0000i-of-0000K.safetensors and
// model.safetensors.index.json, splitting tensors in checkpoint order with balanced bytes.
// Safetensors files and an index already in `dir` are removed first.
// Throws Error(Usage) for shards < 1 or more shards than tensors, OutputFile on I/O failure.
CheckpointSummary write_synthetic_checkpoint(const std::string& dir, nlohmann::json config_json,
                                             uint64_t seed, DType dtype, int shards);

// Qwen2.5-Instruct's generation_config.json values (facts sheet §3).
nlohmann::json qwen_generation_config_json(int64_t bos_token_id);

// "bfloat16" / "float16" / "float32".
std::string torch_dtype_name(DType dtype);

}  // namespace qmpi
