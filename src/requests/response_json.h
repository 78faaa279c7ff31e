// A request's final output as OpenAI JSON: the response body an HTTP server answers, and the
// result lines in the OpenAI Batch output shape:
//   {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <chat.completion
//    or text_completion with choices and usage>}, "error": null}
// and for a request that could not run:
//   {"id", "custom_id", "response": {"status_code": 400, "request_id", "body": {"error": ...}},
//    "error": {"code": "QM501", "message": ...}}
#pragma once
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "requests/events.h"
#include "text/tokenizer.h"

namespace qmpi {

// One JSON line (no newline). `token_ids` adds "prompt_token_ids" to the body and "token_ids"
// to each choice (qmpi extensions; the test suite compares ids).
std::string success_line(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
// The body alone (chat.completion or text_completion, its "id" from line_no), as an HTTP
// server answers it.
std::string response_body(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
std::string error_line(int64_t line_no, const std::string& custom_id, const Error& error);

}  // namespace qmpi
