// The one place a request's sampling settings meet the model's defaults: the fields the request
// (or `qmpi run`'s options) gave win, the rest come from generation_config.json, and the result
// is checked. `qmpi run`, `qmpi batch` and `qmpi serve` all resolve through here, so the same
// settings sample the same tokens through each.
#pragma once
#include <string_view>

#include "engine/sampling_params.h"
#include "model/config.h"
#include "requests/request.h"

namespace qmpi {

// A request without a seed gets one derived from `seed_key` (its custom_id), so a rerun samples
// the same. generation_config.json's top_k 0 means "off", as in Hugging Face transformers.
// Raises SamplingInvalid when a resolved value is out of range (a request's own fields were
// checked when it was parsed; this catches command-line values and generation_config.json).
SamplingParams resolve_sampling(const RequestSampling& fields, const GenerationConfig& gen,
                                std::string_view seed_key);

}  // namespace qmpi
