#include "model/lora_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/errors.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModulesFix =
    "Write --lora-modules NAME=DIR [NAME=DIR ...] with one distinct NAME per adapter folder.";

bool known_module(std::string_view m) {
  return std::find(kLoraModules.begin(), kLoraModules.end(), m) != kLoraModules.end();
}

// PEFT matches a target_modules entry against the end of a module's dotted name, so
// "self_attn.q_proj" and "q_proj" both mean every layer's q_proj.
std::string_view last_component(std::string_view s) {
  const size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

[[noreturn]] void unknown_target(const std::string& where, const std::string& what) {
  std::string list;
  for (std::string_view m : kLoraModules) list += (list.empty() ? "" : ", ") + std::string(m);
  raise(Err::LoraModuleUnknown,
        where + ": target_modules names " + what + ", which is not one of " + list);
}

std::vector<std::string> parse_targets(const nlohmann::json& t, const std::string& where) {
  std::vector<std::string> out;
  if (t.is_string()) {
    const auto& s = t.get_ref<const std::string&>();
    // PEFT's shorthand for every linear layer but the output head.
    if (s == "all-linear") return {kLoraModules.begin(), kLoraModules.end()};
    // Any other string is a regex over module names, which qmpi does not evaluate.
    if (!known_module(s)) unknown_target(where, "the pattern \"" + s + "\"");
    return {s};
  }
  if (!t.is_array() || t.empty())
    raise(Err::LoraAdapterUnreadable, where + ": target_modules is not a list of module names");
  for (const auto& e : t) {
    if (!e.is_string())
      raise(Err::LoraAdapterUnreadable, where + ": target_modules holds " + e.dump(),
            "Give target_modules as a list of names such as [\"q_proj\", \"v_proj\"].");
    const std::string_view m = last_component(e.get_ref<const std::string&>());
    if (!known_module(m)) unknown_target(where, "\"" + e.get<std::string>() + "\"");
    if (std::find(out.begin(), out.end(), m) == out.end()) out.emplace_back(m);
  }
  return out;
}

// A key PEFT writes as null, false, {} or [] when the feature is off.
bool feature_on(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return false;
  const auto& v = j[key];
  return !(v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_structured() && v.empty()));
}

}  // namespace

LoraModuleShape lora_module_shape(const ModelConfig& cfg, std::string_view m) {
  const int64_t h = cfg.hidden_size, I = cfg.intermediate_size;
  if (m == "q_proj") return {"self_attn", cfg.q_width(), h};
  if (m == "k_proj" || m == "v_proj") return {"self_attn", cfg.kv_width(), h};
  if (m == "o_proj") return {"self_attn", h, cfg.q_width()};
  if (m == "gate_proj" || m == "up_proj") return {"mlp", I, h};
  return {"mlp", h, I};  // down_proj
}

std::string peft_tensor_name(const ModelConfig& cfg, int64_t layer, std::string_view module,
                             char half) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." +
         lora_module_shape(cfg, module).block + "." + std::string(module) + ".lora_" + half +
         ".weight";
}

LoraModule parse_lora_module(const std::string& arg) {
  LoraModule m;
  if (!arg.empty() && arg.front() == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(arg);
    } catch (const nlohmann::json::exception&) {
      raise(Err::LoraOptionInvalid, "--lora-modules: '" + arg + "' is not valid JSON", kModulesFix);
    }
    if (!j.contains("name") || !j["name"].is_string() || !j.contains("path") ||
        !j["path"].is_string())
      raise(Err::LoraOptionInvalid,
            "--lora-modules: " + arg + " needs string \"name\" and \"path\" fields", kModulesFix);
    m.name = j["name"].get<std::string>();
    m.path = j["path"].get<std::string>();
  } else {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos)
      raise(Err::LoraOptionInvalid, "--lora-modules: '" + arg + "' is not NAME=DIR", kModulesFix);
    m.name = arg.substr(0, eq);
    m.path = arg.substr(eq + 1);
  }
  if (m.name.empty() || m.path.empty())
    raise(Err::LoraOptionInvalid, "--lora-modules: '" + arg + "' has an empty name or path",
          kModulesFix);
  return m;
}

void check_lora_options(const LoraOptions& opts, const std::vector<std::string>& base_names) {
  if (opts.max_loras < 1 || opts.max_lora_rank < 1)
    raise(Err::LoraOptionInvalid, "--max-loras " + std::to_string(opts.max_loras) +
                                      " and --max-lora-rank " + std::to_string(opts.max_lora_rank) +
                                      " must be positive");
  if (opts.modules.size() > size_t(opts.max_loras))
    raise(Err::LoraTooMany,
          std::to_string(opts.modules.size()) +
              " adapters given to --lora-modules, more than "
              "--max-loras " +
              std::to_string(opts.max_loras),
          "Add --max-loras " + std::to_string(opts.modules.size()) + ".");
  std::set<std::string> seen;
  for (const LoraModule& m : opts.modules) {
    if (!seen.insert(m.name).second)
      raise(Err::LoraOptionInvalid, "--lora-modules names \"" + m.name + "\" twice", kModulesFix);
    if (std::find(base_names.begin(), base_names.end(), m.name) != base_names.end())
      raise(Err::LoraOptionInvalid,
            "--lora-modules: \"" + m.name + "\" is already the base model's name",
            "Give the adapter another name: a request's \"model\" selects the base model or "
            "one adapter.");
  }
}

int32_t lora_index(const LoraOptions& opts, std::string_view name) {
  for (size_t i = 0; i < opts.modules.size(); ++i)
    if (opts.modules[i].name == name) return int32_t(i);
  return -1;
}

float LoraAdapterConfig::scale() const {
  return float(rslora ? alpha / std::sqrt(double(r)) : alpha / double(r));
}

bool LoraAdapterConfig::targets_module(std::string_view module) const {
  return std::find(targets.begin(), targets.end(), module) != targets.end();
}

LoraAdapterConfig parse_lora_adapter_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) raise(Err::LoraAdapterUnreadable, where + " is not a JSON object");
  for (const char* key : {"r", "lora_alpha"})
    if (!j.contains(key) || !j[key].is_number())
      raise(Err::LoraAdapterUnreadable, where + " has no number \"" + key + "\"");
  LoraAdapterConfig c;
  if (!j["r"].is_number_integer() || j["r"].get<int64_t>() < 1)
    raise(Err::LoraAdapterUnreadable,
          where + ": r is " + j["r"].dump() + ", not a positive integer");
  c.r = j["r"].get<int64_t>();
  c.alpha = j["lora_alpha"].get<double>();
  if (j.contains("use_rslora") && j["use_rslora"].is_boolean())
    c.rslora = j["use_rslora"].get<bool>();

  const std::string bias = j.contains("bias") && j["bias"].is_string()
                               ? j["bias"].get<std::string>()
                               : std::string("none");
  if (bias != "none")
    raise(Err::LoraConfigUnsupported, where + ": bias is \"" + bias +
                                          "\"; qmpi adapts with "
                                          "bias \"none\" only");
  for (const char* key : {"use_dora", "rank_pattern", "alpha_pattern"})
    if (feature_on(j, key))
      raise(Err::LoraConfigUnsupported, where + " sets " + key + " (" +
                                            j[key].dump().substr(0, 80) +
                                            "), which qmpi does not compute");
  if (feature_on(j, "modules_to_save"))
    raise(Err::LoraModuleUnknown, where + ": modules_to_save " +
                                      j["modules_to_save"].dump().substr(0, 80) +
                                      " replaces whole modules, which qmpi does not load");
  if (!j.contains("target_modules"))
    raise(Err::LoraAdapterUnreadable, where + " has no target_modules");
  c.targets = parse_targets(j["target_modules"], where);
  return c;
}

LoraAdapterConfig read_lora_adapter_config(const std::string& dir) {
  if (!fs::is_directory(dir))
    raise(Err::LoraAdapterUnreadable, "LoRA adapter folder " + dir + " does not exist");
  const fs::path p = fs::path(dir) / "adapter_config.json";
  std::ifstream in(p);
  if (!in) raise(Err::LoraAdapterUnreadable, "no adapter_config.json in " + dir);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    raise(Err::LoraAdapterUnreadable, p.string() + " is not valid JSON (" + e.what() + ")");
  }
  return parse_lora_adapter_config(j, p.string());
}

}  // namespace qmpi
