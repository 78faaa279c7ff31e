#include "requests/structured_output.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "constrain/constraint_cache.h"
#include "constrain/grammar_token_constraint.h"
#include "constrain/vocab_index.h"
#include "core/errors.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void field_error(const std::string& where, const std::string& what,
                              const std::string& param) {
  throw Error(Err::RequestField, where + ": " + what).with_param(param);
}

ConstraintSource schema_source(const json& v, const std::string& where, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return {ConstraintKind::JsonSchema, v.dump()};
  if (v.is_string()) {
    try {
      return {ConstraintKind::JsonSchema, json::parse(v.get<std::string>()).dump()};
    } catch (const json::exception&) {
      field_error(where, "\"" + param + "\" is a string that is not a JSON schema", param);
    }
  }
  field_error(where, "\"" + param + "\" must be a JSON schema (an object)", param);
}

ConstraintSource text_source(ConstraintKind kind, const json& v, const std::string& where,
                             const std::string& param) {
  if (!v.is_string() || v.get<std::string>().empty())
    field_error(where, "\"" + param + "\" must be a non-empty string", param);
  return {kind, v.get<std::string>()};
}

ConstraintSource choice_source(const json& v, const std::string& where, const std::string& param) {
  bool ok = v.is_array() && !v.empty();
  for (const auto& c : v) ok = ok && c.is_string();
  if (!ok) field_error(where, "\"" + param + "\" must be a non-empty array of strings", param);
  return {ConstraintKind::Choice, v.dump()};
}

std::optional<ConstraintSource> response_format(const json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  const std::string type = v.is_object() && v.contains("type") && v.at("type").is_string()
                               ? v.at("type").get<std::string>()
                               : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return ConstraintSource{ConstraintKind::JsonObject, ""};
  if (type == "json_schema") {
    const json* js = v.contains("json_schema") ? &v.at("json_schema") : nullptr;
    if (!js || !js->is_object() || !js->contains("schema"))
      field_error(
          where,
          "\"response_format\" of type json_schema needs \"json_schema\": {\"name\", \"schema\"}",
          "response_format");
    return schema_source(js->at("schema"), where, "response_format.json_schema.schema");
  }
  field_error(
      where, "\"response_format\" must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}",
      "response_format");
}

std::optional<ConstraintSource> structured_outputs(const json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object())
    field_error(where, "\"structured_outputs\" must be an object", "structured_outputs");
  // Options that change nothing here: qmpi has one backend, compact whitespace and no fallback.
  static const std::array<std::string_view, 4> kNeutral = {
      "backend", "disable_fallback", "disable_any_whitespace", "disable_additional_properties"};
  std::optional<ConstraintSource> out;
  for (const auto& [k, x] : v.items()) {
    if (x.is_null() || std::find(kNeutral.begin(), kNeutral.end(), k) != kNeutral.end()) continue;
    const std::string param = "structured_outputs." + k;
    std::optional<ConstraintSource> one;
    if (k == "json")
      one = schema_source(x, where, param);
    else if (k == "regex")
      one = text_source(ConstraintKind::Regex, x, where, param);
    else if (k == "grammar")
      one = text_source(ConstraintKind::Gbnf, x, where, param);
    else if (k == "choice")
      one = choice_source(x, where, param);
    else if (k == "json_object" && x.is_boolean()) {
      if (x.get<bool>()) one = ConstraintSource{ConstraintKind::JsonObject, ""};
    } else {
      throw Error(
          Err::FieldUnsupported,
          where + ": \"" + param + "\": qmpi supports json, regex, choice, grammar and json_object",
          "Use one of those.")
          .with_param(param);
    }
    if (one && out)
      field_error(where,
                  "\"structured_outputs\" gives more than one of json, regex, choice, grammar",
                  "structured_outputs");
    if (one) out = std::move(one);
  }
  return out;
}

}  // namespace

std::optional<ConstraintSource> read_structured_output(const json& body, const std::string& where) {
  std::optional<ConstraintSource> out;
  std::string from;
  const auto take = [&](const char* key, std::optional<ConstraintSource> src) {
    if (!src) return;
    if (out)
      field_error(where, "\"" + from + "\" and \"" + key + "\" both constrain the output; give one",
                  key);
    out = std::move(src);
    from = key;
  };
  const auto field = [&](const char* key) -> const json* {
    return body.contains(key) && !body.at(key).is_null() ? &body.at(key) : nullptr;
  };
  if (const json* v = field("response_format")) take("response_format", response_format(*v, where));
  if (const json* v = field("structured_outputs"))
    take("structured_outputs", structured_outputs(*v, where));
  if (const json* v = field("guided_json"))
    take("guided_json", schema_source(*v, where, "guided_json"));
  if (const json* v = field("guided_regex"))
    take("guided_regex", text_source(ConstraintKind::Regex, *v, where, "guided_regex"));
  if (const json* v = field("guided_choice"))
    take("guided_choice", choice_source(*v, where, "guided_choice"));
  if (const json* v = field("guided_grammar"))
    take("guided_grammar", text_source(ConstraintKind::Gbnf, *v, where, "guided_grammar"));
  return out;
}

namespace {

// tool_choice "required" or a named function: the rest of the call after tool_call_prefill.
std::optional<ConstraintSource> tool_call_source(const ChatRequest& chat) {
  if (chat.tool_choice != ToolChoice::Required && chat.tool_choice != ToolChoice::Named)
    return std::nullopt;
  json spec = {{"named", chat.tool_choice == ToolChoice::Named}, {"tools", json::array()}};
  for (const auto& t : chat.extras.tools) {
    const json& f = t.at("function");
    const std::string name = f.at("name").get<std::string>();
    if (chat.tool_choice == ToolChoice::Named && name != chat.tool_name) continue;
    spec["tools"].push_back({{"name", name}, {"parameters", f.value("parameters", json())}});
  }
  return ConstraintSource{ConstraintKind::ToolCall, spec.dump()};
}

// Whether the answer may think first: --reasoning-parser, and the prompt has not closed a
// <think> block already (Qwen3 with enable_thinking false writes an empty one).
bool may_think(std::span<const int32_t> prompt, const ModelFacts& model) {
  if (!model.reasoning_parser || prompt.empty()) return false;
  const size_t n = std::min<size_t>(prompt.size(), 4);
  std::string tail;
  try {
    tail = model.tokenizer->decode(prompt.subspan(prompt.size() - n));
  } catch (const Error&) {
    return false;
  }
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return !tail.ends_with("</think>");
}

}  // namespace

std::shared_ptr<const TokenConstraint> request_constraint(const Request& req,
                                                          std::span<const int32_t> prompt,
                                                          const ModelFacts& model) {
  std::optional<ConstraintSource> src = req.constraint;
  const std::optional<ConstraintSource> call =
      req.endpoint == Endpoint::Chat ? tool_call_source(req.chat) : std::nullopt;
  if (src && call)
    throw Error(Err::RequestField,
                "a forced tool call (tool_choice) and a structured output "
                "cannot constrain the same answer; give one")
        .with_param("tool_choice");
  if (!src) src = call;
  if (!src) return nullptr;
  if (!model.tokenizer)
    raise(Err::RequestField, "structured output needs the model's tokenizer.json");
  const auto vocab = VocabIndex::shared(*model.tokenizer, model.vocab_size);
  auto compiled = constraint_cache().get(*src, vocab);
  std::vector<int32_t> stops = model.eos_ids;
  stops.insert(stops.end(), req.sampling.stop_token_ids.begin(), req.sampling.stop_token_ids.end());
  int32_t gate = -1;
  if (!call && may_think(prompt, model))
    gate = model.tokenizer->token_to_id("</think>").value_or(-1);
  return std::make_shared<GrammarTokenConstraint>(std::move(compiled), std::move(stops), gate);
}

}  // namespace qmpi
