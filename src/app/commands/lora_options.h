// LoRA on the command line, with vLLM's spelling: --lora-modules NAME=DIR ... (or vLLM's JSON
// form), --max-loras, --max-lora-rank and --enable-lora on every engine command, and --lora NAME
// on run and logits to pick one adapter for the command's one sequence.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "model/lora_config.h"

namespace qmpi {

boost::program_options::options_description lora_options(LoraOptions& o);
// --lora NAME (run, logits).
void add_lora_select_option(boost::program_options::options_description& d, std::string& name);

// Once parsed: checks the adapters against the names the base model answers to
// (check_lora_options) and returns the index of `selected` (-1 when empty). Raises
// LoraOptionInvalid when `selected` names no --lora-modules adapter.
int32_t finish_lora_options(const LoraOptions& o, const std::vector<std::string>& base_names,
                            const std::string& selected = {});

// The adapters' names in index order (what a request's "model" may give besides the base's).
std::vector<std::string> lora_names(const LoraOptions& o);

}  // namespace qmpi
