#include "serve/http_completion.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "serve/protocol.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HttpCompletion parse_completion(std::string_view text, Endpoint endpoint, const BatchModel& model,
                                const std::string& model_name, uint64_t seq) {
  HttpCompletion c;
  check_json_depth(text);
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    raise(Err::RequestJson, std::string("the body is not valid JSON (") + e.what() + ")");
  }
  if (!body.is_object()) raise(Err::RequestJson, "the body is not a JSON object");
  // Fields of the HTTP API that the shared request checker does not know.
  bool has_stream_options = false;
  if (body.contains("stream_options") && !body.at("stream_options").is_null()) {
    const json& so = body.at("stream_options");
    has_stream_options = true;
    if (!so.is_object()) raise(Err::RequestField, "\"stream_options\" must be an object");
    for (const auto& [k, v] : so.items())
      if (k != "include_usage" || !v.is_boolean())
        raise(Err::RequestField, "\"stream_options\" takes only \"include_usage\": true/false");
    c.include_usage = so.value("include_usage", false);
  }
  body.erase("stream_options");
  if (body.contains("return_token_ids")) {
    if (!body.at("return_token_ids").is_boolean())
      raise(Err::RequestField, "\"return_token_ids\" must be true or false");
    c.shape.token_ids = body.at("return_token_ids").get<bool>();
    body.erase("return_token_ids");
  }
  BatchRequest r;
  r.openai_line = true;
  r.endpoint = endpoint;
  r.custom_id = "http-" + std::to_string(seq);
  read_request_body(body, r, "the request", true);
  if (has_stream_options && !r.stream)
    raise(Err::RequestField, "\"stream_options\" is only allowed with \"stream\": true");
  if (r.sampling.logprobs)
    raise(Err::RequestField, "logprobs are not available from qmpi serve yet");

  c.stream = r.stream;
  c.choices = r.sampling.n;
  c.shape.endpoint = endpoint;
  c.shape.model = r.model.empty() ? model_name : r.model;
  c.shape.created = unix_now();
  c.request.client_id = r.custom_id;
  c.request.prompt = request_prompt_ids(r, model);
  c.request.req = std::move(r);
  return c;
}

std::string completion_id(Endpoint endpoint, uint64_t ticket) {
  return (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(ticket);
}

}  // namespace qmpi
