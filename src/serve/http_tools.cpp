#include "serve/http_tools.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "requests/request_parser.h"
#include "requests/served_model.h"
#include "text/tokenizer.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

// The body as an object whose "model", if any, is one the server answers to.
json parse_object(std::string_view body, const ModelFacts& model) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    raise(Err::RequestJson, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) raise(Err::RequestJson, "the body must be one JSON object");
  if (j.contains("model") && !j.at("model").is_null()) {
    if (!j.at("model").is_string())
      throw Error(Err::RequestField, "\"model\" must be a string").with_param("model");
    check_served_model(j.at("model").get<std::string>(), model.served_names, model.adapter_names);
  }
  return j;
}

bool flag(const json& j, const char* key, bool def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  if (!j.at(key).is_boolean())
    throw Error(Err::RequestField, std::string("\"") + key + "\" must be true or false")
        .with_param(key);
  return j.at(key).get<bool>();
}

}  // namespace

std::string tokenize_response(std::string_view body, const ModelFacts& model,
                              int64_t max_model_len) {
  json j = parse_object(body, model);
  const bool token_strs = flag(j, "return_token_strs", false);
  // Qwen's tokenizers add no BOS or EOS: add_special_tokens changes nothing, but is checked.
  flag(j, "add_special_tokens", true);
  for (const char* key : {"return_token_strs", "add_special_tokens", "model"}) j.erase(key);
  // Read as a completion or chat request is, so that it renders the same.
  Request req;
  read_request_body(j, req, "request", false);
  const std::vector<int32_t> ids = request_prompt_ids(req, model);
  json out = {{"count", ids.size()}, {"max_model_len", max_model_len}, {"tokens", ids}};
  if (token_strs) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(model.tokenizer->id_to_token(id).value_or(""));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string detokenize_response(std::string_view body, const ModelFacts& model) {
  const json j = parse_object(body, model);
  if (!j.contains("tokens") || !j.at("tokens").is_array())
    throw Error(Err::RequestField, "/detokenize needs \"tokens\": an array of token ids")
        .with_param("tokens");
  std::vector<int32_t> ids;
  for (const json& t : j.at("tokens")) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_size)
      throw Error(Err::RequestField, "\"tokens\" holds " + t.dump() + ", not a token id below " +
                                         std::to_string(model.vocab_size))
          .with_param("tokens");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  return json{{"prompt", model.tokenizer->decode(ids)}}.dump(-1, ' ', false,
                                                             json::error_handler_t::replace);
}

std::string version_response() {
  return json{{"version", QMPI_VERSION}}.dump();
}

}  // namespace qmpi
