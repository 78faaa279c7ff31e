// vLLM's --hf-overrides JSON and --rope-scaling JSON: changes to config.json made on the command
// line instead of in the file, applied before the config is parsed (ModelConfig::load).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace qmpi {

struct ConfigOverrides {
  std::string hf_overrides;  // a JSON object merged into config.json (objects key by key)
  std::string rope_scaling;  // a JSON object (or null) that replaces config.json's rope_scaling

  bool empty() const { return hf_overrides.empty() && rope_scaling.empty(); }
  // `config` with the overrides applied: --hf-overrides first, then --rope-scaling. Raises
  // Err::Usage naming the option when its text is not JSON of the right kind.
  nlohmann::json apply(nlohmann::json config) const;
};

}  // namespace qmpi
