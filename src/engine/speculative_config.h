// --speculative-config, as vLLM spells it: a JSON object naming how rank 0 guesses the next
// tokens of a decoding sequence (prompt lookup, "method": "ngram", or a small draft model of
// the same tokenizer, "model": DIR) and how many it guesses per step. The target model checks
// every guess in one pass (scheduler.h, last_stage.h).
#pragma once
#include <cstdint>
#include <string>

namespace qmpi {

struct SpeculativeConfig {
  int32_t num_tokens = 0;  // guesses per step at most (num_speculative_tokens); 0 = off
  // Prompt lookup: the longest suffix of the sequence, between these lengths, that occurred
  // earlier in it proposes the tokens that followed that occurrence.
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // A draft model's folder or file (engine/draft_model_proposer.h); empty: prompt lookup.
  std::string model;

  bool enabled() const { return num_tokens > 0; }
};

// Parses the option's JSON (empty text: speculation off). Raises Usage for bad JSON, an unknown
// key, a method qmpi lacks (EAGLE, ...) or numbers out of range.
SpeculativeConfig parse_speculative_config(const std::string& json_text);

// The help text of --speculative-config, the same on run, batch, serve and bench.
inline constexpr const char* kSpeculativeConfigHelp =
    "speculative decoding as vLLM spells it, e.g. '{\"method\": \"ngram\", "
    "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}': "
    "prompt lookup guesses up to k tokens per step and the model checks them in one pass "
    "(same output as without it); '{\"model\": DIR, \"num_speculative_tokens\": 4}': a small "
    "draft model of the same tokenizer guesses them, on rank 0";

}  // namespace qmpi
