// Model shapes `qmpi make-model` can create: named presets and copies of a real config.json.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

namespace qmpi {

// "tiny": a small Qwen2 for tests (hidden 192, 6 layers, 12 heads, 6 KV heads) that splits over
// TP 1/2/3/6 and PP 1/2/3 and keeps the real 151936-row vocabulary.
// "qwen2.5-0.5b": the shape of Qwen2.5-0.5B-Instruct.
// "tiny-qwen3", "tiny-qwen2-moe", "tiny-qwen3-moe": tiny's split-friendly shape in the other
// families (decoupled head_dim; experts uneven over TP 3; sparse and dense layers mixed).
// "qwen3-0.6b", "qwen3-1.7b", "qwen3-30b-a3b": the shapes of those releases (on 1.7B the FP8
// projections are 69% of an FP8 release's bytes a token beside its bf16 lm_head; 59% on 0.6B);
// "qwen3-moe-bench": 30B-A3B's layers, 8 of them with 64 experts, for decode benchmarks. The
// returned config's `raw` is the full Hugging Face config.json object. Throws Error(Usage) naming
// the presets for an unknown name.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// The shape of a real model: its config.json, validated, without any quantization_config (the
// weights qmpi writes are floating point).
ModelConfig config_like(const std::string& config_path);

}  // namespace qmpi
