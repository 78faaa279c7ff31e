// Request JSON into a checked Request (request.h), strictly. One line of a batch input
// file is an OpenAI Batch API line
//   {"custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/completions", "body"}
// or the plain form {"id", "prompt" | "messages", ...sampling fields}. A line that cannot be
// used becomes an error with its catalogue code (RequestJson, RequestField, SamplingInvalid)
// and the job goes on. See docs/batch.md for the fields.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/errors.h"
#include "requests/request.h"

namespace qmpi {

struct ParsedLine {
  std::string custom_id;  // line_id(N) when the line has none that can be read
  std::optional<Request> request;
  std::optional<Error> error;
};

// `line_no` is 1-based and goes into error messages.
ParsedLine parse_request_line(std::string_view line, int64_t line_no);

// Checks the request fields of `body` (an OpenAI request body, or the fields of a plain request
// without its id) into `r`. With `r.openai_line` set, `r.endpoint` is what the URL asks for and
// the body must match it. `where` starts every message ("line 7", "request \"a1\""). Only
// serving passes `allow_stream`. Fields it does not know are ignored, as vLLM does, unless
// request_fields.h says otherwise. Raises RequestJson, RequestField, FieldUnsupported or
// SamplingInvalid.
void read_request_body(const nlohmann::ordered_json& body, Request& r, const std::string& where,
                       bool allow_stream);

// The id a line without a usable custom_id/id gets in the output: "qmpi-line-N". The prefix is
// reserved (src/batch/batch_ids.h), so it never equals another line's own id.
std::string line_id(int64_t line_no);
// Whether `id` has the reserved form "qmpi-line-<digits>".
bool is_line_id_form(const std::string& id);

}  // namespace qmpi
