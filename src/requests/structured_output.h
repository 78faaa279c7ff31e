// Structured output on a request, the same for HTTP, ZeroMQ and batch: OpenAI's
// response_format (json_object, json_schema), vLLM's structured_outputs {json | regex | choice
// | grammar | json_object} and the older guided_json / guided_regex / guided_choice /
// guided_grammar (one of them per request), and the tool call that tool_choice "required" or a
// named function asks for. The constraint becomes the sequence's TokenConstraint.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "constrain/constraint_source.h"
#include "engine/token_constraint.h"
#include "requests/request.h"
#include "requests/sequence_spec.h"

namespace qmpi {

// The structured-output field of a request body, if it has one. `where` starts messages.
// RequestField for a malformed one or for two at once, FieldUnsupported for an option qmpi
// cannot honour.
std::optional<ConstraintSource> read_structured_output(const nlohmann::ordered_json& body,
                                                       const std::string& where);

// The constraint of `req`'s sequences (null: none), compiled through the process's cache.
// With --reasoning-parser and a prompt that leaves the answer free to think, it starts after
// </think>. RequestField or FieldUnsupported for a source that cannot be compiled.
std::shared_ptr<const TokenConstraint> request_constraint(const Request& req,
                                                          std::span<const int32_t> prompt,
                                                          const ModelFacts& model);

}  // namespace qmpi
