// `qmpi make-lora`: a random LoRA adapter for a base model in PEFT's layout (adapter_config.json
// + adapter_model.safetensors), for tests and benchmarks. A and B are SyntheticTensor values
// (unit gain each, unlike PEFT's zero-initialised B), so with lora_alpha near r the adapter
// moves the logits as much as the projections it adapts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace qmpi {

struct SyntheticLoraSpec {
  int64_t r = 8;
  double alpha = 16.0;
  bool rslora = false;
  std::vector<std::string> targets{"q_proj", "v_proj"};  // among kLoraModules
  uint64_t seed = 0;
  DType dtype = DType::F32;
};

// Writes the adapter into `dir` (created). Returns the parameter count. Raises Usage for a
// target that is not a decoder projection or an MLP target on a model whose layers are all MoE.
int64_t write_synthetic_lora(const std::string& dir, const ModelConfig& base,
                             const SyntheticLoraSpec& spec);

}  // namespace qmpi
