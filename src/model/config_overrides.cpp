#include "model/config_overrides.h"

#include "core/errors.h"

namespace qmpi {
using nlohmann::json;

namespace {

json parse_option(const std::string& text, const char* option, bool null_ok) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    raise(Err::Usage, std::string(option) + " is not JSON: " + e.what(),
          std::string("Quote the object for the shell, e.g. ") + option +
              " '{\"rope_type\": \"yarn\", \"factor\": 4.0}'.");
  }
  if (!j.is_object() && !(null_ok && j.is_null()))
    raise(Err::Usage, std::string(option) + " must be a JSON object, got " + j.dump());
  return j;
}

// vLLM's rule: a key whose old and new values are both objects is merged key by key; any
// other value replaces the old one.
void merge_into(json& target, const json& patch) {
  for (const auto& [key, value] : patch.items()) {
    auto it = target.find(key);
    if (it != target.end() && it->is_object() && value.is_object())
      merge_into(*it, value);
    else
      target[key] = value;
  }
}

}  // namespace

json ConfigOverrides::apply(json config) const {
  if (!hf_overrides.empty())
    merge_into(config, parse_option(hf_overrides, "--hf-overrides", false));
  if (!rope_scaling.empty())
    config["rope_scaling"] = parse_option(rope_scaling, "--rope-scaling", true);
  return config;
}

}  // namespace qmpi
