// The names a server answers to (--served-model-name, vLLM's flag; by default the model
// folder's name). A request naming another model is refused rather than answered by a model
// it did not ask for; one that names none gets the first name.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace qmpi {

// Raises ModelNotFound when `requested` is neither empty nor one of `names` (no names: any).
void check_served_model(const std::string& requested, std::span<const std::string> names);

// "%2F" -> "/": a model id as it appears in GET /v1/models/{id}. Malformed escapes stay as
// written.
std::string percent_decode(std::string_view s);

}  // namespace qmpi
