#include "requests/response_json.h"

#include <nlohmann/json.hpp>

#include "requests/message_shaper.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

std::string dump(const json& j) {
  // Token strings can be part of a character: invalid UTF-8 becomes U+FFFD in the JSON text
  // (the exact bytes are in "bytes").
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string token_text(const Tokenizer& tok, int32_t id) {
  return tok.has_token(id) ? std::string(tok.token_bytes(id)) : std::string();
}

json byte_list(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_logprobs(const ChoiceOutput& c, const Tokenizer& tok) {
  json content = json::array();
  for (size_t i = 0; i < c.tokens.size(); ++i)
    content.push_back(chat_logprob_entry(tok, c.tokens[i], c.logprobs[i],
                                         i < c.top.size() ? std::span<const TokenLogprob>(c.top[i])
                                                          : std::span<const TokenLogprob>()));
  return {{"content", content}};
}

json completion_logprobs(const ChoiceOutput& c, const Tokenizer& tok) {
  return completion_logprobs_json(tok, c.tokens, c.logprobs, c.top, 0);
}

}  // namespace

json chat_logprob_entry(const Tokenizer& tok, int32_t token, float logprob,
                        std::span<const TokenLogprob> top) {
  const std::string t = token_text(tok, token);
  json alts = json::array();
  for (const auto& a : top) {
    const std::string at = token_text(tok, a.token);
    alts.push_back({{"token", at}, {"logprob", a.logprob}, {"bytes", byte_list(at)}});
  }
  return {{"token", t}, {"logprob", logprob}, {"bytes", byte_list(t)}, {"top_logprobs", alts}};
}

json completion_logprobs_json(const Tokenizer& tok, std::span<const int32_t> ids,
                              std::span<const float> logprobs,
                              std::span<const std::vector<TokenLogprob>> top, size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string t = token_text(tok, ids[i]);
    tokens.push_back(t);
    lps.push_back(logprobs[i]);
    offsets.push_back(offset);
    offset += t.size();
    json alts = json::object();
    if (i < top.size())
      for (const auto& a : top[i]) alts[token_text(tok, a.token)] = a.logprob;
    tops.push_back(alts);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json tool_call_json(const ToolCall& c) {
  return {{"id", c.id},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

json assistant_message(const ShapedMessage& m, const OutputFormat& f) {
  json msg = {{"role", "assistant"}, {"content", m.content ? json(*m.content) : json(nullptr)}};
  if (f.reasoning) msg["reasoning_content"] = m.reasoning ? json(*m.reasoning) : json(nullptr);
  if (!m.calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : m.calls) calls.push_back(tool_call_json(c));
    msg["tool_calls"] = std::move(calls);
  }
  return msg;
}

namespace {

std::string batch_id(int64_t line_no) {
  return "batch_req_" + std::to_string(line_no);
}
std::string request_id(int64_t line_no) {
  return "req_" + std::to_string(line_no);
}

json body_json(const RequestOutput& out, const Tokenizer& tok, bool token_ids) {
  const bool chat = out.endpoint == Endpoint::Chat;
  json choices = json::array();
  int64_t generated = 0;
  for (size_t i = 0; i < out.choices.size(); ++i) {
    const ChoiceOutput& c = out.choices[i];
    generated += int64_t(c.tokens.size());
    json choice = {{"index", i}};
    std::string reason = c.finish_reason;
    if (chat) {
      const ShapedMessage m = shape_message(out.format, c.text, call_id_prefix(out.key, i));
      choice["message"] = assistant_message(m, out.format);
      reason = message_finish_reason(reason, m.calls.size());
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] =
        out.logprobs ? (chat ? chat_logprobs(c, tok) : completion_logprobs(c, tok)) : json(nullptr);
    choice["finish_reason"] = reason;
    if (token_ids) choice["token_ids"] = c.tokens;
    choices.push_back(std::move(choice));
  }
  json body = {{"id", (chat ? "chatcmpl-" : "cmpl-") + std::to_string(out.key)},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", out.created},
               {"model", out.model},
               {"choices", choices},
               {"usage",
                {{"prompt_tokens", out.prompt_tokens},
                 {"completion_tokens", generated},
                 {"total_tokens", out.prompt_tokens + generated}}}};
  if (token_ids) body["prompt_token_ids"] = out.prompt_ids;
  return body;
}

}  // namespace

std::string response_body(const RequestOutput& out, const Tokenizer& tok, bool token_ids) {
  return dump(body_json(out, tok, token_ids));
}

std::string success_line(const RequestOutput& out, const Tokenizer& tok, bool token_ids) {
  const json body = body_json(out, tok, token_ids);
  const json line = {
      {"id", batch_id(out.key)},
      {"custom_id", out.custom_id},
      {"response", {{"status_code", 200}, {"request_id", request_id(out.key)}, {"body", body}}},
      {"error", nullptr}};
  return dump(line);
}

std::string error_line(int64_t line_no, const std::string& custom_id, const Error& e) {
  std::string message = e.message();
  if (!e.fix().empty()) message += " (" + e.fix() + ")";
  // As OpenAI's Batch API writes a request that did not run: no response, the error alone.
  const json line = {{"id", batch_id(line_no)},
                     {"custom_id", custom_id},
                     {"response", nullptr},
                     {"error", {{"code", error_id(e.code())}, {"message", message}}}};
  return dump(line);
}

}  // namespace qmpi
