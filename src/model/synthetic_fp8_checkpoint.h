// `qmpi make-model --quant fp8`: a random-weight model in the layout of Qwen's -FP8 releases
// (every decoder projection an e4m3 `.weight` with a float32 `.weight_scale_inv` per 128x128
// block, partial blocks at the edges; other tensors bf16), made by quantizing the dense
// generator's weights block by block, plus, on request, the float model it dequantizes to.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"

namespace qmpi {

// The quantization_config Qwen's FP8 releases carry.
nlohmann::json fp8_quantization_config_json();

// Writes the FP8 model into `dir` and, when `float_dir` is not empty, its dequantized F32 twin
// there (every projection W[r][c] = e4m3(q) * scale exactly). Shards and files as
// write_synthetic_checkpoint.
CheckpointSummary write_synthetic_fp8_checkpoint(const std::string& dir, nlohmann::json config_json,
                                                 uint64_t seed, int shards,
                                                 const std::string& float_dir);

}  // namespace qmpi
