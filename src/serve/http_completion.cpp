#include "serve/http_completion.h"

#include "core/unix_time.h"
#include "requests/served_model.h"
#include "serve/http_body.h"
#include "serve/protocol.h"

namespace qmpi {

HttpCompletion parse_completion(std::string_view text, Endpoint endpoint, const ModelFacts& model,
                                const std::string& model_name, uint64_t seq) {
  HttpCompletion c;
  // The one body checker (serve/http_body.h), shared with the fuzz tests and its JSON number
  // and depth policy.
  HttpBody parsed = parse_http_body(text, endpoint, "http-" + std::to_string(seq));
  c.include_usage = parsed.include_usage;
  c.shape.token_ids = parsed.token_ids;
  Request& r = parsed.request;
  check_served_model(r.model, model.served_names);
  c.stream = r.stream;
  c.choices = r.choice_count();
  c.shape.endpoint = endpoint;
  c.shape.model = r.model.empty() ? model_name : r.model;
  c.shape.created = unix_seconds();
  c.request.client_id = r.custom_id;
  c.request.prompt = request_prompt_ids(r, model);
  c.shape.logprobs = r.sampling.logprobs;
  c.shape.tokenizer = model.tokenizer;
  c.shape.format = output_format(r, model.reasoning_parser, model.tokenizer, c.request.prompt);
  c.request.req = std::move(r);
  return c;
}

std::string completion_id(Endpoint endpoint, uint64_t ticket) {
  return (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(ticket);
}

}  // namespace qmpi
