// Errors as OpenAI's API shapes them, for HTTP replies and batch result lines alike:
// {"message", "type", "param", "code"}.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi {

// OpenAI's code name where it has one for the error (clients test for them:
// context_length_exceeded, invalid_api_key, model_not_found, unsupported_parameter), else the
// catalogue's name in snake_case ("request_field").
std::string openai_error_code(Err code);

// The message with the fix in brackets and the catalogue code at the end ("[QM501]"); "type"
// invalid_request_error for a `user` error (the request's fault), server_error otherwise; "param"
// the request field at fault, or null.
nlohmann::ordered_json openai_error_object(const Error& e, bool user);

}  // namespace qmpi
