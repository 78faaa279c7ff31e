// The names a server answers to (--served-model-name, vLLM's flag; by default the model
// folder's name). A request naming another model is refused rather than answered by a model
// it did not ask for; one that names none gets the first name.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace qmpi {

// What a request's "model" selects, the one place that decides it: the index of the LoRA
// adapter (--lora-modules) it names in `adapters`, or -1 for the base model when it is empty or
// one of `names` (no names: any other name). Raises ModelNotFound for any other name.
int32_t check_served_model(const std::string& requested, std::span<const std::string> names,
                           std::span<const std::string> adapters = {});

// "%2F" -> "/": a model id as it appears in GET /v1/models/{id}. Malformed escapes stay as
// written.
std::string percent_decode(std::string_view s);

}  // namespace qmpi
