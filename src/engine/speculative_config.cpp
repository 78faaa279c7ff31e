#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi {
namespace {

using nlohmann::json;

constexpr int32_t kMaxSpeculativeTokens = 32;
constexpr const char* kFix =
    "Give --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
    "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}' or '{\"model\": DRAFT_DIR, "
    "\"num_speculative_tokens\": 4}', or leave it out.";

[[noreturn]] void bad(const std::string& what) {
  raise(Err::Usage, "--speculative-config: " + what, kFix);
}

int32_t number(const json& j, const char* key, int32_t fallback, int32_t lo, int32_t hi) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    bad(std::string("\"") + key + "\" is " + it->dump() + "; it must be an integer from " +
        std::to_string(lo) + " to " + std::to_string(hi));
  return it->get<int32_t>();
}

// As vLLM: "model" names a draft model ("method" may say "draft_model").
std::string draft_model(const json& j) {
  const json& model = j.at("model");
  if (!model.is_string() || model.get<std::string>().empty())
    bad("\"model\" must be the draft model's folder or file, got " + model.dump());
  if (j.contains("method") && j.at("method") != "draft_model")
    bad("\"method\" " + j.at("method").dump() + " does not go with \"model\" (a draft model)");
  // The draft runs whole on rank 0 (engine/draft_model_proposer.h): vLLM's 1.
  if (j.contains("draft_tensor_parallel_size") && j.at("draft_tensor_parallel_size") != 1)
    bad("\"draft_tensor_parallel_size\" " + j.at("draft_tensor_parallel_size").dump() +
        ": qmpi runs the draft model whole on rank 0, so only 1 is possible");
  if (j.contains("prompt_lookup_min") || j.contains("prompt_lookup_max"))
    bad("prompt_lookup_min/max are prompt lookup's (\"method\": \"ngram\"), not a draft "
        "model's");
  return model.get<std::string>();
}

}  // namespace

SpeculativeConfig parse_speculative_config(const std::string& text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    bad(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) bad("it must be a JSON object, got " + j.dump());
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_max" &&
        key != "prompt_lookup_min" && key != "model" && key != "draft_tensor_parallel_size")
      bad("\"" + key +
          "\" is not a key qmpi reads (method, model, num_speculative_tokens, "
          "prompt_lookup_max, prompt_lookup_min, draft_tensor_parallel_size)");
  const auto method = j.find("method");
  if (j.contains("model")) {
    c.model = draft_model(j);
  } else if (j.contains("draft_tensor_parallel_size")) {
    bad("\"draft_tensor_parallel_size\" goes with a draft model (\"model\")");
  } else if (method == j.end() || !method->is_string() || *method != "ngram") {
    bad("\"method\" must be \"ngram\" (prompt lookup), or give \"model\" (a draft model); got " +
        (method == j.end() ? std::string("none") : method->dump()));
  }
  if (!j.contains("num_speculative_tokens")) bad("\"num_speculative_tokens\" is required");
  c.num_tokens = number(j, "num_speculative_tokens", 0, 1, kMaxSpeculativeTokens);
  if (!c.model.empty()) return c;
  // As vLLM: one bound given sets the other to it; neither gives 5.
  const int32_t lo = number(j, "prompt_lookup_min", 0, 1, 1024);
  const int32_t hi = number(j, "prompt_lookup_max", 0, 1, 1024);
  c.prompt_lookup_min = lo ? lo : (hi ? hi : 5);
  c.prompt_lookup_max = hi ? hi : c.prompt_lookup_min;
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    bad("prompt_lookup_min " + std::to_string(c.prompt_lookup_min) +
        " is above prompt_lookup_max " + std::to_string(c.prompt_lookup_max));
  return c;
}

}  // namespace qmpi
