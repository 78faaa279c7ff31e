#include "serve/protocol.h"

#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "serve/api_key.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;
using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ojson with_id(const char* type, const std::string& id) {
  ojson j = {{"type", type}};
  if (!id.empty()) j["id"] = ojson::parse(id);
  return j;
}

// The id as JSON text, and its plain value (the string itself, or the digits), which seeds
// requests without a seed as a batch custom_id does.
std::pair<std::string, std::string> read_id(const json& j) {
  const json& v = j.at("id");
  std::string text, plain;
  if (v.is_string() && !v.get<std::string>().empty()) {
    text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    plain = v.get<std::string>();
  } else if (v.is_number_integer()) {
    text = plain = v.dump();
  } else {
    raise(Err::RequestField, "\"id\" must be a non-empty string or an integer");
  }
  if (text.size() > kMaxIdBytes)
    raise(Err::RequestField, "\"id\" is " + std::to_string(text.size()) + " bytes long; at most " +
                                 std::to_string(kMaxIdBytes) + " are allowed");
  return {text, plain};
}

void only_fields(const json& j, std::initializer_list<const char*> allowed, const char* type) {
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok)
      raise(Err::RequestField,
            "\"" + k.substr(0, 64) + "\" is not a field of a " + type + " message");
  }
}

// [[{"token_id", "logprob"}, ...] per token]
ojson top_json(const std::vector<std::vector<TokenLogprob>>& top) {
  ojson all = ojson::array();
  for (const auto& alts : top) {
    ojson a = ojson::array();
    for (const TokenLogprob& t : alts) a.push_back({{"token_id", t.token}, {"logprob", t.logprob}});
    all.push_back(std::move(a));
  }
  return all;
}

ojson usage(const RequestOutput& out) {
  int64_t generated = 0;
  for (const auto& c : out.choices) generated += int64_t(c.tokens.size());
  return {{"prompt_tokens", out.prompt_tokens},
          {"completion_tokens", generated},
          {"total_tokens", out.prompt_tokens + generated}};
}

// The key a generate or cancel message must carry; "api_key" leaves the message here.
void require_api_key(json& j, std::string_view key) {
  const auto given = j.find("api_key");
  // A key of another type, to a server with a key, is a wrong key (Unauthorized, as over HTTP).
  const bool text = given != j.end() && given->is_string();
  if (key.empty() && given != j.end() && !text)
    raise(Err::RequestField, "\"api_key\" must be a string");
  if (!key.empty() && (!text || !api_key_matches(given->get<std::string>(), key)))
    raise(Err::Unauthorized,
          given == j.end() ? "the message has no \"api_key\" and the server needs an API key"
          : text           ? "the message's \"api_key\" is not the server's API key"
                           : "the message's \"api_key\" is not a string, so not the server's key",
          "Send \"api_key\" with the key given to --api-key (qmpi client: --api-key, "
          "--api-key-file or QMPI_API_KEY).");
  if (given != j.end()) j.erase(given);
}

ojson replica_state(const ReplicaLoad& l) {
  ojson j{{"state", l.lost.empty() ? "up" : "down"}};
  if (!l.lost.empty()) j["reason"] = l.lost;
  return j;
}

}  // namespace

ClientMessage parse_client_message(std::string_view text, std::string& id,
                                   std::string_view api_key) {
  RequestJson parsed = parse_request_json(text, "the message");
  json& j = parsed.value;
  if (!j.is_object()) raise(Err::RequestJson, "the message is not a JSON object");
  std::string plain_id;
  // An id that overflowed reads as null: the number's error, without an id, says it best.
  if (parsed.number_error && (!j.contains("id") || j.at("id").is_null()))
    throw *parsed.number_error;
  if (j.contains("id")) std::tie(id, plain_id) = read_id(j);
  if (parsed.number_error) throw *parsed.number_error;
  if (j.contains("v")) {
    const json& v = j.at("v");
    if (!v.is_number_integer() || v.get<int64_t>() != kProtocolVersion)
      raise(Err::RequestField,
            "protocol version \"v\": " + v.dump().substr(0, 32) + " is not supported",
            "Send \"v\": " + std::to_string(kProtocolVersion) + " (docs/protocol.md).");
  }
  std::string type = "generate";
  if (j.contains("type")) {
    if (!j.at("type").is_string()) raise(Err::RequestField, "\"type\" must be a string");
    type = j.at("type").get<std::string>();
  }
  ClientMessage m;
  m.id = id;
  if (type == "health" || type == "stats") {
    only_fields(j, {"v", "type", "id", "api_key"}, type.c_str());
    m.type = type == "health" ? MessageType::Health : MessageType::Stats;
    return m;
  }
  if (type == "cancel") {
    require_api_key(j, api_key);
    only_fields(j, {"v", "type", "id"}, "cancel");
    if (id.empty()) raise(Err::RequestField, "a cancel message needs the \"id\" of the request");
    m.type = MessageType::Cancel;
    return m;
  }
  if (type != "generate")
    raise(Err::RequestField, "\"type\": \"" + type.substr(0, 32) +
                                 "\" is not a message type (generate, cancel, health, stats)");
  require_api_key(j, api_key);
  if (id.empty()) raise(Err::RequestField, "a generate message needs an \"id\"");
  json body = std::move(j);
  body.erase("v");
  body.erase("type");
  body.erase("id");
  read_request_body(body, m.request, "request " + id, true);
  m.request.custom_id = plain_id;
  return m;
}

std::string delta_message(const std::string& id, const ServeEvent& d) {
  ojson j = with_id("delta", id);
  j["index"] = d.index;
  j["text"] = d.text;
  j["token_ids"] = d.token_ids;
  if (!d.logprobs.empty()) {
    j["logprobs"] = d.logprobs;
    if (!d.top_logprobs.empty() && !d.top_logprobs[0].empty())
      j["top_logprobs"] = top_json(d.top_logprobs);
  }
  return dump(j);
}

std::string overall_finish_reason(const RequestOutput& out) {
  return out.choices.empty() ? std::string() : out.choices[0].finish_reason;
}

std::string final_message(const std::string& id, const RequestOutput& out, bool with_text) {
  ojson j = with_id("final", id);
  ojson choices = ojson::array();
  for (size_t i = 0; i < out.choices.size(); ++i) {
    const ChoiceOutput& c = out.choices[i];
    ojson choice = {{"index", i}, {"finish_reason", c.finish_reason}};
    if (with_text) {
      choice["text"] = c.text;
      choice["token_ids"] = c.tokens;
      if (out.logprobs) {
        choice["logprobs"] = c.logprobs;
        if (!c.top.empty()) choice["top_logprobs"] = top_json(c.top);
      }
    }
    // A chat answer read as a message (tool calls, reasoning), streamed or not: deltas carry
    // the text as generated.
    if (out.endpoint == Endpoint::Chat && (out.format.tools || out.format.reasoning)) {
      const ShapedMessage m = shape_message(out.format, c.text, call_id_prefix(out.key, i));
      choice["message"] = assistant_message(m, out.format);
      choice["finish_reason"] = message_finish_reason(c.finish_reason, m.calls.size());
    }
    choices.push_back(std::move(choice));
  }
  j["finish_reason"] = choices.empty() ? ojson("") : choices[0]["finish_reason"];
  j["choices"] = std::move(choices);
  j["usage"] = usage(out);
  return dump(j);
}

std::string error_message(const std::string& id, const Error& e) {
  ojson j = with_id("error", id);
  j["code"] = error_id(e.code());
  j["name"] = std::string(error_entry(e.code()).name);
  j["message"] = e.message();
  if (!e.fix().empty()) j["fix"] = e.fix();
  return dump(j);
}

std::string health_message(const std::string& id, Health h) {
  ojson j = with_id("health", id);
  j["status"] = health_name(h);
  return dump(j);
}

std::string health_body(const EngineSnapshot& e) {
  ojson j{{"status", health_name(e.health)}};
  if (e.replicas.size() > 1) {
    j["replicas"] = ojson::array();
    for (const ReplicaLoad& l : e.replicas) j["replicas"].push_back(replica_state(l));
  }
  return dump(j);
}

std::string stats_message(const std::string& id, const EngineSnapshot& e, int64_t queued,
                          const MetricCounters& c, int64_t clients) {
  ojson j = with_id("stats", id);
  j["status"] = health_name(e.health);
  j["queued"] = queued;
  j["waiting"] = e.waiting;
  j["running"] = e.running;
  j["requests_in_flight"] = e.requests;
  j["kv_blocks_used"] = e.kv_blocks_used;
  j["kv_blocks_free"] = e.kv_blocks_total - e.kv_blocks_used;
  j["kv_blocks_total"] = e.kv_blocks_total;
  j["steps"] = e.steps;
  j["preemptions"] = e.preemptions;
  j["clients"] = clients;
  j["requests"] = {{"ok", c.ok}, {"cancelled", c.cancelled}, {"error", c.failed}};
  j["prompt_tokens"] = c.prompt_tokens;
  j["generation_tokens"] = c.generation_tokens;
  j["replicas"] = ojson::array();
  for (const ReplicaLoad& l : e.replicas) {
    ojson r{{"waiting", l.waiting}, {"running", l.running}, {"generated", l.generated}};
    r.update(replica_state(l));
    j["replicas"].push_back(std::move(r));
  }
  return dump(j);
}

}  // namespace qmpi
