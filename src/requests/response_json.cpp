#include "requests/response_json.h"

#include <nlohmann/json.hpp>

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
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    const std::string t = token_text(tok, c.tokens[i]);
    json alts = json::array();
    if (i < c.top.size())
      for (const auto& a : c.top[i]) {
        const std::string at = token_text(tok, a.token);
        alts.push_back({{"token", at}, {"logprob", a.logprob}, {"bytes", byte_list(at)}});
      }
    content.push_back({{"token", t},
                       {"logprob", c.logprobs[i]},
                       {"bytes", byte_list(t)},
                       {"top_logprobs", alts}});
  }
  return {{"content", content}};
}

json completion_logprobs(const ChoiceOutput& c, const Tokenizer& tok) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    const std::string t = token_text(tok, c.tokens[i]);
    tokens.push_back(t);
    lps.push_back(c.logprobs[i]);
    offsets.push_back(offset);
    offset += t.size();
    json alts = json::object();
    if (i < c.top.size())
      for (const auto& a : c.top[i]) alts[token_text(tok, a.token)] = a.logprob;
    tops.push_back(alts);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

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
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    choice["logprobs"] =
        out.logprobs ? (chat ? chat_logprobs(c, tok) : completion_logprobs(c, tok)) : json(nullptr);
    choice["finish_reason"] = c.finish_reason;
    if (token_ids) choice["token_ids"] = c.tokens;
    choices.push_back(std::move(choice));
  }
  json body = {{"id", (chat ? "chatcmpl-" : "cmpl-") + std::to_string(out.line_no)},
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
      {"id", batch_id(out.line_no)},
      {"custom_id", out.custom_id},
      {"response", {{"status_code", 200}, {"request_id", request_id(out.line_no)}, {"body", body}}},
      {"error", nullptr}};
  return dump(line);
}

std::string error_line(int64_t line_no, const std::string& custom_id, const Error& e) {
  const auto& entry = error_entry(e.code());
  const std::string code = error_id(e.code());
  std::string message = e.message();
  if (!e.fix().empty()) message += " (" + e.fix() + ")";
  const bool user = e.code() != Err::Internal;
  const json body = {{"error",
                      {{"message", message},
                       {"type", user ? "invalid_request_error" : "server_error"},
                       {"param", nullptr},
                       {"code", std::string(entry.name)}}}};
  const json line = {
      {"id", batch_id(line_no)},
      {"custom_id", custom_id},
      {"response",
       {{"status_code", user ? 400 : 500}, {"request_id", request_id(line_no)}, {"body", body}}},
      {"error", {{"code", code}, {"message", message}}}};
  return dump(line);
}

}  // namespace qmpi
