#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi {
namespace {

using nlohmann::json;

constexpr int32_t kMaxSpeculativeTokens = 32;
constexpr const char* kFix =
    "Give --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
    "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}', or leave it out.";

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
        key != "prompt_lookup_min" && key != "model")
      bad("\"" + key +
          "\" is not a key qmpi reads (method, num_speculative_tokens, "
          "prompt_lookup_max, prompt_lookup_min)");
  if (j.contains("model"))
    bad("a draft model (\"model\") is not supported yet; prompt lookup (\"method\": \"ngram\") is");
  const auto method = j.find("method");
  if (method == j.end() || !method->is_string() || method->get<std::string>() != "ngram")
    bad("\"method\" must be \"ngram\" (prompt lookup), the one method qmpi has; got " +
        (method == j.end() ? std::string("none") : method->dump()));
  if (!j.contains("num_speculative_tokens")) bad("\"num_speculative_tokens\" is required");
  c.num_tokens = number(j, "num_speculative_tokens", 0, 1, kMaxSpeculativeTokens);
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
