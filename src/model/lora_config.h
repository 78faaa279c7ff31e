// LoRA adapters as vLLM takes them: the options (--lora-modules NAME=DIR, --max-loras,
// --max-lora-rank) and each adapter's PEFT adapter_config.json (r, lora_alpha, use_rslora,
// target_modules, bias). An adapter's index is its place in --lora-modules: it travels with each
// sequence of a step and picks the adapter's weights on every rank (model/lora_loader.h).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace qmpi {

// The decoder projections an adapter may target, in the order of a layer's weights.
inline constexpr std::array<std::string_view, 7> kLoraModules = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// Where a projection sits in a layer and its full [out, in] in the base model: lora_A is then
// [r, in] and lora_B [out, r].
struct LoraModuleShape {
  const char* block;  // "self_attn" or "mlp"
  int64_t out, in;
};
// `module` must be one of kLoraModules.
LoraModuleShape lora_module_shape(const ModelConfig& cfg, std::string_view module);

// PEFT's name of one half ('A' or 'B') of the pair on `module` of decoder layer `layer`:
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
std::string peft_tensor_name(const ModelConfig& cfg, int64_t layer, std::string_view module,
                             char half);

struct LoraModule {
  std::string name;  // what a request's "model" says to select it
  std::string path;  // the PEFT folder
};

struct LoraOptions {
  std::vector<LoraModule> modules;  // --lora-modules, in order: adapter i is modules[i]
  int max_loras = 1;                // vLLM's defaults
  int max_lora_rank = 16;
  bool enable = false;  // --enable-lora: accepted; adapters are on when modules are given
};

// One --lora-modules value: NAME=DIR or vLLM's JSON {"name": ..., "path": ...}. Raises
// LoraOptionInvalid.
LoraModule parse_lora_module(const std::string& arg);

// Distinct names, none equal to a name the base model answers to, at most max_loras of them
// (LoraTooMany), limits positive (LoraOptionInvalid).
void check_lora_options(const LoraOptions& opts, const std::vector<std::string>& base_names);

// The index of adapter `name` in opts.modules, or -1 when no adapter has that name.
int32_t lora_index(const LoraOptions& opts, std::string_view name);

struct LoraAdapterConfig {
  int64_t r = 0;
  double alpha = 0.0;
  bool rslora = false;
  std::vector<std::string> targets;  // among kLoraModules

  // What B(A x) is multiplied by: lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
  float scale() const;
  bool targets_module(std::string_view module) const;
};

// adapter_config.json's content; `where` names the file in errors. Raises
// LoraAdapterUnreadable (r or lora_alpha missing or not a number), LoraConfigUnsupported (bias
// other than "none", DoRA, rank/alpha patterns) and LoraModuleUnknown (a target that is not a
// decoder projection, modules_to_save).
LoraAdapterConfig parse_lora_adapter_config(const nlohmann::json& j, const std::string& where);

// Reads DIR/adapter_config.json (LoraAdapterUnreadable when the folder or file is missing or the
// JSON does not parse), then parse_lora_adapter_config.
LoraAdapterConfig read_lora_adapter_config(const std::string& dir);

}  // namespace qmpi
