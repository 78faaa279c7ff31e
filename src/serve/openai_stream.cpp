#include "serve/openai_stream.h"

#include <nlohmann/json.hpp>

#include "requests/openai_error.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

std::string event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json chunk(const StreamShape& s, json choices) {
  const bool chat = s.endpoint == Endpoint::Chat;
  return {{"id", s.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", s.created},
          {"model", s.model},
          {"choices", std::move(choices)}};
}

json choice(const StreamShape& s, int32_t index, const std::string& text, const json& reason) {
  json c = {{"index", index}};
  if (s.endpoint == Endpoint::Chat)
    c["delta"] = text.empty() ? json::object() : json{{"content", text}};
  else
    c["text"] = text;
  c["logprobs"] = nullptr;
  c["finish_reason"] = reason;
  return c;
}

bool has_logprobs(const StreamShape& s, const ServeEvent* d) {
  return s.logprobs && s.tokenizer && d && !d->logprobs.empty();
}

// The delta's tokens in OpenAI's logprobs shape of its endpoint.
json delta_logprobs(const StreamShape& s, const ServeEvent& d, size_t text_offset) {
  if (s.endpoint != Endpoint::Chat)
    return completion_logprobs_json(*s.tokenizer, d.token_ids, d.logprobs, d.top_logprobs,
                                    text_offset);
  json content = json::array();
  for (size_t i = 0; i < d.logprobs.size() && i < d.token_ids.size(); ++i)
    content.push_back(chat_logprob_entry(*s.tokenizer, d.token_ids[i], d.logprobs[i],
                                         i < d.top_logprobs.size()
                                             ? std::span<const TokenLogprob>(d.top_logprobs[i])
                                             : std::span<const TokenLogprob>()));
  return {{"content", std::move(content)}};
}

}  // namespace

std::string sse_role_chunk(const StreamShape& s, int32_t index) {
  json c = {{"index", index},
            {"delta", {{"role", "assistant"}, {"content", ""}}},
            {"logprobs", nullptr},
            {"finish_reason", nullptr}};
  return event(chunk(s, json::array({c})));
}

std::string sse_delta_chunk(const StreamShape& s, const ServeEvent& d, size_t text_offset) {
  const bool lp = has_logprobs(s, &d);
  if (d.text.empty() && !s.token_ids && !lp) return {};
  json c = choice(s, d.index, d.text, nullptr);
  if (lp) c["logprobs"] = delta_logprobs(s, d, text_offset);
  if (s.token_ids) c["token_ids"] = d.token_ids;
  return event(chunk(s, json::array({c})));
}

std::string sse_chat_chunk(const StreamShape& s, int32_t index, const MessageDelta& m,
                           size_t first_call, const ServeEvent* d) {
  const bool lp = has_logprobs(s, d);
  if (m.empty() && !(s.token_ids && d) && !lp) return {};
  json delta = json::object();
  if (!m.reasoning.empty()) delta["reasoning_content"] = m.reasoning;
  if (!m.content.empty()) delta["content"] = m.content;
  if (!m.calls.empty()) {
    json calls = json::array();
    for (size_t k = 0; k < m.calls.size(); ++k) {
      json call = {{"index", first_call + k}};
      const json parts = tool_call_json(m.calls[k]);
      for (const auto& [key, v] : parts.items()) call[key] = v;
      calls.push_back(std::move(call));
    }
    delta["tool_calls"] = std::move(calls);
  }
  json c = {{"index", index},
            {"delta", std::move(delta)},
            {"logprobs", nullptr},
            {"finish_reason", nullptr}};
  if (lp) c["logprobs"] = delta_logprobs(s, *d, 0);
  if (s.token_ids) c["token_ids"] = d ? json(d->token_ids) : json::array();
  return event(chunk(s, json::array({c})));
}

std::string sse_finish_chunk(const StreamShape& s, int32_t index, const std::string& reason) {
  json c = choice(s, index, "", reason);
  if (s.token_ids) c["token_ids"] = json::array();
  return event(chunk(s, json::array({c})));
}

std::string sse_usage_chunk(const StreamShape& s, const RequestOutput& out) {
  int64_t generated = 0;
  for (const auto& c : out.choices) generated += int64_t(c.tokens.size());
  json j = chunk(s, json::array());
  j["usage"] = {{"prompt_tokens", out.prompt_tokens},
                {"completion_tokens", generated},
                {"total_tokens", out.prompt_tokens + generated}};
  return event(j);
}

std::string http_error_body(const Error& e) {
  const bool user = e.code() != Err::Internal && error_entry(e.code()).exit_code == 2;
  json error = openai_error_object(e, user);
  error["qmpi_code"] = error_id(e.code());
  const json j = {{"error", error}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_error_chunk(const Error& e) {
  return "data: " + http_error_body(e) + "\n\n";
}

int http_status(Err code) {
  switch (code) {
    case Err::Unauthorized:
      return 401;
    case Err::UnknownRequestId:
    case Err::ModelNotFound:
    case Err::RouteNotFound:
      return 404;
    case Err::BodyTooLarge:
      return 413;
    case Err::Busy:
      return 503;
    case Err::TransferCodingUnsupported:
      return 501;
    case Err::RequestJson:
    case Err::RequestField:
    case Err::PromptTooLong:
    case Err::SamplingInvalid:
    case Err::FieldUnsupported:
    case Err::ClientTooSlow:
    case Err::ChatTemplateFailed:  // the template refused this conversation: retrying cannot help
      return 400;
    default:
      return 500;
  }
}

}  // namespace qmpi
