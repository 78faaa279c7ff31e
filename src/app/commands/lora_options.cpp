#include "app/commands/lora_options.h"

#include "core/errors.h"

namespace qmpi {
namespace po = boost::program_options;

po::options_description lora_options(LoraOptions& o) {
  po::options_description d("LoRA adapters");
  d.add_options()("lora-modules",
                  po::value<std::vector<std::string>>()->multitoken()->notifier(
                      [&o](const std::vector<std::string>& args) {
                        for (const std::string& a : args) o.modules.push_back(parse_lora_module(a));
                      }),
                  "LoRA adapters (PEFT folders) loaded at start-up: NAME=DIR ... or vLLM's JSON "
                  "'{\"name\": NAME, \"path\": DIR}'; a request's \"model\": NAME selects one")(
      "max-loras", po::value(&o.max_loras)->default_value(o.max_loras),
      "most adapters --lora-modules may load (vLLM's)")(
      "max-lora-rank", po::value(&o.max_lora_rank)->default_value(o.max_lora_rank),
      "highest adapter rank r accepted (vLLM's)")(
      "enable-lora", po::bool_switch(&o.enable),
      "accepted for vLLM's command lines; adapters are on whenever --lora-modules names some");
  return d;
}

void add_lora_select_option(po::options_description& d, std::string& name) {
  d.add_options()("lora", po::value(&name),
                  "run with the --lora-modules adapter of this NAME (default: the base model)");
}

int32_t finish_lora_options(const LoraOptions& o, const std::vector<std::string>& base_names,
                            const std::string& selected) {
  check_lora_options(o, base_names);
  if (selected.empty()) return -1;
  const int32_t i = lora_index(o, selected);
  if (i < 0)
    raise(Err::LoraOptionInvalid, "--lora " + selected + " names no adapter of --lora-modules",
          "Load it with --lora-modules " + selected +
              "=DIR, or leave --lora out for the base "
              "model.");
  return i;
}

std::vector<std::string> lora_names(const LoraOptions& o) {
  std::vector<std::string> names;
  for (const LoraModule& m : o.modules) names.push_back(m.name);
  return names;
}

}  // namespace qmpi
