// The body of POST /v1/chat/completions or /v1/completions turned into a request for the hub:
// parsed, checked like a batch line (plus the HTTP-only fields stream_options and
// return_token_ids) and tokenized. It runs on the gateway's preparation threads, never on an
// I/O thread: tokenizing a large prompt must not hold up other connections.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "requests/sequence_spec.h"
#include "serve/openai_stream.h"
#include "serve/request_hub.h"

namespace qmpi {

struct HttpCompletion {
  ServeRequest request;  // arrival and sink left for the caller to set
  StreamShape shape;     // id left for the caller: it names the hub's ticket
  int32_t choices = 1;
  bool stream = false;
  bool include_usage = false;
};

// Raises the request's Error (RequestJson, RequestField, SamplingInvalid, PromptTooLong).
// `seq` numbers the front's requests: the request's id is "http-<seq>", which seeds sampling
// when the body gives no seed.
HttpCompletion parse_completion(std::string_view body, Endpoint endpoint, const ModelFacts& model,
                                const std::string& model_name, uint64_t seq);

// "chatcmpl-7" / "cmpl-7" for ticket 7.
std::string completion_id(Endpoint endpoint, uint64_t ticket);

}  // namespace qmpi
