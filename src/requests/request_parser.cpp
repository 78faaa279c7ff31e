#include "requests/request_parser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "requests/request_fields.h"
#include "requests/request_json.h"
#include "requests/request_limits.h"
#include "requests/structured_output.h"
#include "text/chat_messages.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

// The envelope of an OpenAI Batch API line (its body is checked as a request).
const std::set<std::string, std::less<>> kOpenAiFields = {"custom_id", "method", "url", "body"};

// Builds the messages of one line; `where` is "line 12" for every message.
class LineChecker {
 public:
  explicit LineChecker(std::string where, bool allow_stream = false)
      : where_(std::move(where)), allow_stream_(allow_stream) {}

  // `param`: the request field at fault, for the OpenAI error object.
  [[noreturn]] void field_error(const std::string& what, const std::string& param = {}) const {
    throw Error(Err::RequestField, where_ + ": " + what).with_param(param);
  }
  [[noreturn]] void sampling_error(const std::string& what, const std::string& param) const {
    throw Error(Err::SamplingInvalid, where_ + ": " + what).with_param(param);
  }
  static std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }
  void expect(bool ok, const std::string& key, const char* type, const json& v) const {
    if (!ok) field_error("\"" + key + "\" must be " + type + ", got " + shown(v), key);
  }

  double number(const json& obj, const std::string& key) const {
    const json& v = obj.at(key);
    expect(v.is_number(), key, "a number", v);
    return v.get<double>();
  }
  int64_t integer(const json& obj, const std::string& key) const {
    const json& v = obj.at(key);
    // 16.0 is accepted as 16; 16.5 and "16" are not.
    const bool whole = v.is_number_integer() ||
                       (v.is_number_float() && std::nearbyint(v.get<double>()) == v.get<double>() &&
                        std::abs(v.get<double>()) < 9.0e15);
    expect(whole, key, "an integer", v);
    return v.is_number_unsigned()  ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
           : v.is_number_integer() ? v.get<int64_t>()
                                   : int64_t(v.get<double>());
  }
  bool boolean(const json& obj, const std::string& key) const {
    const json& v = obj.at(key);
    expect(v.is_boolean(), key, "true or false", v);
    return v.get<bool>();
  }
  std::string string(const json& obj, const std::string& key) const {
    const json& v = obj.at(key);
    expect(v.is_string(), key, "a string", v);
    return v.get<std::string>();
  }

  // A field of the sampling table (engine/sampling_params.h): its type, then its range.
  template <class T>
  void scalar(const json& obj, const SamplingField& row, T& out) const {
    const std::string key(row.name);
    const double v = std::is_floating_point_v<T> ? number(obj, key) : double(integer(obj, key));
    in_range(row.range.allows(v), obj, key, row.range.text());
    if constexpr (std::is_same_v<T, uint64_t>)
      out = uint64_t(integer(obj, key));  // a seed: every bit of it
    else
      out = T(v);
  }

  // Shows the value as the request wrote it: -1, not -1.0; 1e300, not the float it became.
  void in_range(bool ok, const json& obj, const std::string& key, const std::string& range) const {
    if (!ok)
      sampling_error("\"" + key + "\" must be " + range + ", got " + shown(obj.at(key)), key);
  }

  // The messages as sent (tool_calls, tool_call_id, reasoning_content... go to the template).
  void messages(const json& v, Request& r) const {
    expect(v.is_array() && !v.empty(), "messages", "a non-empty array of messages", v);
    try {
      r.chat.extras.messages = normalize_chat_messages(v);
    } catch (const Error& e) {
      throw Error(e.code(), where_ + ": " + e.message(), e.fix()).with_param("messages");
    }
    r.messages = chat_message_list(r.chat.extras.messages);
  }

  // tools, tool_choice, chat_template_kwargs, add_generation_prompt, parallel_tool_calls.
  void chat_fields(const json& obj, Request& r) const {
    ChatRequest& c = r.chat;
    std::vector<std::string> names;
    if (obj.contains("tools") && !obj.at("tools").is_null()) {
      const json& tools = obj.at("tools");
      expect(tools.is_array(), "tools", "an array of tools", tools);
      for (size_t i = 0; i < tools.size(); ++i) {
        const json& t = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        const bool function = t.is_object() && t.value("type", json("function")) == "function" &&
                              t.contains("function") && t.at("function").is_object();
        expect(function, at, "{\"type\": \"function\", \"function\": {...}}", t);
        const json& f = t.at("function");
        const bool named = f.contains("name") && f.at("name").is_string() &&
                           !f.at("name").get<std::string>().empty();
        expect(named, at + ".function.name", "a non-empty string", f.value("name", json()));
        if (f.contains("parameters") && !f.at("parameters").is_null())
          expect(f.at("parameters").is_object(), at + ".function.parameters",
                 "a JSON Schema object", f.at("parameters"));
        names.push_back(f.at("name").get<std::string>());
      }
      if (!tools.empty()) c.extras.tools = tools;
    }
    c.tool_choice = names.empty() ? ToolChoice::None : ToolChoice::Auto;
    if (obj.contains("tool_choice") && !obj.at("tool_choice").is_null()) {
      const json& v = obj.at("tool_choice");
      const std::string word = v.is_string() ? v.get<std::string>() : "";
      if (word == "none") {
        c.tool_choice = ToolChoice::None;
      } else if (word == "auto" || word == "required") {
        if (names.empty())
          field_error("\"tool_choice\": \"" + word + "\" needs \"tools\"", "tool_choice");
        c.tool_choice = word == "auto" ? ToolChoice::Auto : ToolChoice::Required;
      } else {
        const bool named = v.is_object() && v.value("type", json()) == "function" &&
                           v.contains("function") && v.at("function").is_object() &&
                           v.at("function").contains("name") &&
                           v.at("function").at("name").is_string();
        expect(named, "tool_choice",
               "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
               "{\"name\": ...}}",
               v);
        c.tool_name = v.at("function").at("name").get<std::string>();
        if (std::find(names.begin(), names.end(), c.tool_name) == names.end())
          field_error("\"tool_choice\" names the function \"" + c.tool_name.substr(0, 64) +
                          "\", which is not in \"tools\"",
                      "tool_choice");
        c.tool_choice = ToolChoice::Named;
      }
    }
    if (obj.contains("chat_template_kwargs") && !obj.at("chat_template_kwargs").is_null()) {
      const json& k = obj.at("chat_template_kwargs");
      expect(k.is_object(), "chat_template_kwargs", "an object (template variables)", k);
      // Variables the request's own fields set, checked above: a kwarg must not replace them.
      for (const char* reserved :
           {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"})
        if (k.contains(reserved))
          field_error("\"chat_template_kwargs\" may not set \"" + std::string(reserved) +
                          "\": the request's own fields and the model set it",
                      "chat_template_kwargs");
      c.extras.kwargs = k;
    }
    if (obj.contains("add_generation_prompt") && !obj.at("add_generation_prompt").is_null())
      c.add_generation_prompt = boolean(obj, "add_generation_prompt");
    if (obj.contains("parallel_tool_calls") && !obj.at("parallel_tool_calls").is_null())
      c.parallel_tool_calls = boolean(obj, "parallel_tool_calls");
  }

  void prompt(const json& v, Request& r) const {
    // OpenAI's list of prompts (texts, or lists of token ids; LangChain's OpenAI class sends
    // even one prompt so): the first is the request's prompt, the others follow it.
    const bool list = v.is_array() && !v.empty() && (v[0].is_string() || v[0].is_array());
    if (!list) return one_prompt(v, r.prompt, r.prompt_ids);
    if (v.size() > kMaxPrompts)
      field_error("\"prompt\" lists " + std::to_string(v.size()) + " prompts; at most " +
                      std::to_string(kMaxPrompts) + " are allowed in one request",
                  "prompt");
    one_prompt(v[0], r.prompt, r.prompt_ids);
    for (size_t i = 1; i < v.size(); ++i) {
      CompletionPrompt& p = r.more_prompts.emplace_back();
      one_prompt(v[i], p.text, p.ids);
    }
  }

  void one_prompt(const json& v, std::string& text, std::vector<int32_t>& ids) const {
    if (v.is_string()) {
      text = v.get<std::string>();
      if (text.empty()) field_error("\"prompt\" is empty", "prompt");
      return;
    }
    expect(v.is_array() && !v.empty() && v[0].is_number_integer(), "prompt",
           "a string, an array of token ids, or a list of those", v);
    for (const json& t : v) {
      expect(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX,
             "prompt", "a string or an array of token ids", t);
      ids.push_back(int32_t(t.get<int64_t>()));
    }
  }

  void sampling(const json& obj, Request& r) const {
    RequestSampling& s = r.sampling;
    const bool chat = r.endpoint == Endpoint::Chat;
    for (size_t i = 0; i < kSamplingFieldCount; ++i) {
      const SamplingField& row = kSamplingFields[i];
      if (!obj.contains(std::string(row.name))) continue;
      std::visit([&](auto member) { scalar(obj, row, s.values.*member); }, row.member);
      s.given.set(i);
    }
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (!obj.contains(key) || obj.at(key).is_null()) continue;
      const int64_t v = integer(obj, key);
      in_range(v >= 1, obj, key, "at least 1");
      s.max_tokens = v;
    }
    if (obj.contains("stop") && !obj.at("stop").is_null()) {
      const json& v = obj.at("stop");
      if (v.is_string()) {
        s.stop.push_back(v.get<std::string>());
      } else {
        expect(v.is_array(), "stop", "a string or an array of strings", v);
        for (const json& x : v) {
          expect(x.is_string(), "stop", "a string or an array of strings", x);
          s.stop.push_back(x.get<std::string>());
        }
      }
      if (s.stop.size() > kMaxStopStrings)
        sampling_error("\"stop\" has " + std::to_string(s.stop.size()) + " strings; at most " +
                           std::to_string(kMaxStopStrings) + " are allowed",
                       "stop");
      for (const auto& x : s.stop) {
        if (x.empty()) sampling_error("\"stop\" strings must not be empty", "stop");
        if (x.size() > kMaxStopBytes)
          sampling_error("a \"stop\" string is " + std::to_string(x.size()) +
                             " bytes long; at most " + std::to_string(kMaxStopBytes) +
                             " are allowed",
                         "stop");
      }
    }
    if (obj.contains("stop_token_ids") && !obj.at("stop_token_ids").is_null()) {
      const json& v = obj.at("stop_token_ids");
      expect(v.is_array(), "stop_token_ids", "an array of token ids", v);
      for (const json& x : v) {
        expect(x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX,
               "stop_token_ids", "an array of token ids", x);
        s.stop_token_ids.push_back(int32_t(x.get<int64_t>()));
      }
    }
    if (obj.contains("ignore_eos")) s.ignore_eos = boolean(obj, "ignore_eos");
    if (obj.contains("n") && !obj.at("n").is_null()) {
      const int64_t n = integer(obj, "n");
      in_range(n >= 1 && n <= kMaxChoices, obj, "n", "in [1, " + std::to_string(kMaxChoices) + "]");
      s.n = int32_t(n);
    }
    if (obj.contains("stream") && !obj.at("stream").is_null() && boolean(obj, "stream")) {
      if (!allow_stream_)
        field_error("\"stream\": true is not available in batch jobs (results are whole lines)",
                    "stream");
      r.stream = true;
    }
    if (obj.contains("user") && !obj.at("user").is_null()) string(obj, "user");
    const std::string range = "in [0, " + std::to_string(kMaxTopLogprobs) + "]";
    if (chat) {
      if (obj.contains("logprobs") && !obj.at("logprobs").is_null())
        s.logprobs = boolean(obj, "logprobs");
      if (obj.contains("top_logprobs") && !obj.at("top_logprobs").is_null()) {
        const int64_t k = integer(obj, "top_logprobs");
        in_range(k >= 0 && k <= kMaxTopLogprobs, obj, "top_logprobs", range);
        if (!s.logprobs)
          sampling_error("\"top_logprobs\" needs \"logprobs\": true", "top_logprobs");
        s.top_logprobs = int32_t(k);
      }
    } else if (obj.contains("logprobs") && !obj.at("logprobs").is_null()) {
      // Completions: logprobs is the number of alternatives (0 = the sampled tokens only).
      const int64_t k = integer(obj, "logprobs");
      in_range(k >= 0 && k <= kMaxTopLogprobs, obj, "logprobs", range);
      s.logprobs = true;
      s.top_logprobs = int32_t(k);
    }
  }

  // The request fields of `obj` (a body, or a plain line less its "id").
  void request(const json& obj, Request& r, const std::string& skip_key) const {
    const bool chat = obj.contains("messages");
    if (chat && obj.contains("prompt")) field_error("give \"messages\" or \"prompt\", not both");
    if (!chat && !obj.contains("prompt"))
      field_error("the request has no \"messages\" or \"prompt\"");
    if (r.openai_line && chat != (r.endpoint == Endpoint::Chat))
      field_error(std::string("url ") + (r.endpoint == Endpoint::Chat
                                             ? "/v1/chat/completions needs \"messages\""
                                             : "/v1/completions needs \"prompt\""));
    r.endpoint = chat ? Endpoint::Chat : Endpoint::Completion;
    for (const auto& [k, v] : obj.items()) {
      if (!skip_key.empty() && k == skip_key) continue;
      const FieldVerdict verdict = check_request_field(k, v, chat);
      switch (verdict.kind) {
        case FieldVerdict::Kind::Known:
        case FieldVerdict::Kind::Ignored:
          break;
        case FieldVerdict::Kind::OtherEndpoint:
        case FieldVerdict::Kind::Misspelt:
          field_error(verdict.why, k);
        case FieldVerdict::Kind::Unsupported:
          throw Error(Err::FieldUnsupported, where_ + ": " + verdict.why, verdict.fix)
              .with_param(k);
      }
    }
    if (obj.contains("model") && !obj.at("model").is_null()) r.model = string(obj, "model");
    if (chat) {
      messages(obj.at("messages"), r);
      chat_fields(obj, r);
    } else {
      prompt(obj.at("prompt"), r);
    }
    sampling(obj, r);
    r.constraint = read_structured_output(obj, where_);
  }

 private:
  std::string where_;
  bool allow_stream_;
};

// The custom_id / id of a line, if it has a usable one.
std::optional<std::string> read_id(const json& j) {
  for (const char* key : {"custom_id", "id"}) {
    if (!j.contains(key)) continue;
    const json& v = j.at(key);
    if (v.is_string() && !v.get<std::string>().empty()) return v.get<std::string>();
    if (v.is_number_integer()) return v.dump();
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

constexpr std::string_view kLineIdPrefix = "qmpi-line-";

std::string line_id(int64_t line_no) {
  return std::string(kLineIdPrefix) + std::to_string(line_no);
}

bool is_line_id_form(const std::string& id) {
  if (id.size() <= kLineIdPrefix.size() || id.compare(0, kLineIdPrefix.size(), kLineIdPrefix) != 0)
    return false;
  return std::all_of(id.begin() + std::ptrdiff_t(kLineIdPrefix.size()), id.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

ParsedLine parse_request_line(std::string_view line, int64_t line_no) {
  ParsedLine out;
  out.custom_id = line_id(line_no);
  const LineChecker check("line " + std::to_string(line_no));
  try {
    RequestJson parsed = parse_request_json(line, "line " + std::to_string(line_no));
    const json& j = parsed.value;
    if (!j.is_object())
      raise(Err::RequestJson, "line " + std::to_string(line_no) + " is not a JSON object");
    if (const auto id = read_id(j)) out.custom_id = *id;
    if (parsed.number_error) throw *parsed.number_error;  // after the id, which it echoes
    Request r;
    const bool openai = j.contains("custom_id") || j.contains("body") || j.contains("url");
    r.openai_line = openai;
    if (openai) {
      for (const auto& [k, v] : j.items())
        if (!kOpenAiFields.count(k))
          check.field_error("\"" + k +
                            "\" is not a field of an OpenAI batch line (custom_id, "
                            "method, url, body)");
      if (!j.contains("custom_id")) check.field_error("the line has no \"custom_id\"");
      r.custom_id = check.string(j, "custom_id");
      if (r.custom_id.empty()) check.field_error("\"custom_id\" is empty");
      if (j.contains("method") && check.string(j, "method") != "POST")
        check.field_error("\"method\" must be \"POST\", got " + LineChecker::shown(j.at("method")));
      if (!j.contains("url")) check.field_error("the line has no \"url\"");
      const std::string url = check.string(j, "url");
      if (url == "/v1/chat/completions")
        r.endpoint = Endpoint::Chat;
      else if (url == "/v1/completions")
        r.endpoint = Endpoint::Completion;
      else
        check.field_error("\"url\" must be /v1/chat/completions or /v1/completions, got " +
                          LineChecker::shown(j.at("url")));
      if (!j.contains("body") || !j.at("body").is_object())
        check.field_error("\"body\" must be an object with the request");
      check.request(j.at("body"), r, "");
    } else {
      if (!j.contains("id")) check.field_error("the line has no \"id\" (or \"custom_id\")");
      if (!read_id(j)) check.expect(false, "id", "a non-empty string or an integer", j.at("id"));
      r.custom_id = *read_id(j);
      check.request(j, r, "id");
    }
    out.request = std::move(r);
  } catch (const Error& e) {
    out.error = e;
  }
  return out;
}

void read_request_body(const nlohmann::ordered_json& body, Request& r, const std::string& where,
                       bool allow_stream) {
  const LineChecker check(where, allow_stream);
  if (!body.is_object()) raise(Err::RequestJson, where + ": the request is not a JSON object");
  check.request(body, r, "");
}

}  // namespace qmpi
