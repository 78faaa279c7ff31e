// The model config of a GGUF file: llama.cpp's metadata keys (ARCH.block_count,
// ARCH.attention.head_count, ARCH.rope.freq_base, ...) for the qwen2, qwen3, qwen2moe and
// qwen3moe architectures, written as the config.json a Hugging Face release of the same model
// has, so ModelConfig::from_json checks a GGUF model exactly as it checks a folder (and
// --hf-overrides apply alike).
#pragma once
#include <nlohmann/json.hpp>

#include "io/gguf_weights.h"
#include "model/quant_config.h"

namespace qmpi {

// Throws ArchUnsupported for another general.architecture, GgufMetadata for a missing or
// mistyped key, naming the file.
nlohmann::json gguf_config_json(const GgufWeights& model);

// QuantMethod::Gguf with group_size the widest block of any block-quantized tensor (TP cuts
// MLP columns on multiples of it), or no quantization when every tensor is F32/F16/BF16.
QuantConfig gguf_quant_config(const GgufWeights& model);

}  // namespace qmpi
