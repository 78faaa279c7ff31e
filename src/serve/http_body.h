// The body of POST /v1/chat/completions and /v1/completions, read and checked without any HTTP
// around it (so any HTTP front can use it, and the fuzz tests can reach it): the fields of a
// ZeroMQ generate message, plus stream_options and the qmpi extension return_token_ids.
#pragma once
#include <string>
#include <string_view>

#include "requests/request_parser.h"

namespace qmpi {

struct HttpBody {
  Request request;             // custom_id as given
  bool include_usage = false;  // stream_options.include_usage
  bool token_ids = false;      // return_token_ids
};

// Raises RequestJson, RequestField or SamplingInvalid.
HttpBody parse_http_body(std::string_view body, Endpoint endpoint, std::string custom_id);

}  // namespace qmpi
