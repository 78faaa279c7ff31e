// --speculative-config: vLLM's JSON for prompt lookup and for a draft model is read, its defaults
// follow vLLM's, and what qmpi cannot do (EAGLE, unknown keys, numbers out of range, prompt
// lookup's bounds with a draft model) is refused with Usage naming the problem.
#include <gtest/gtest.h>

#include "../expect_error.h"
#include "engine/speculative_config.h"

namespace qmpi {
namespace {

TEST(SpeculativeConfig, ReadsPromptLookup) {
  EXPECT_FALSE(parse_speculative_config("").enabled());
  SpeculativeConfig c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5,
          "prompt_lookup_min": 2})");
  EXPECT_EQ(c.num_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  // One bound sets the other; neither gives 5 and 5.
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3,
                                   "prompt_lookup_max": 4})");
  EXPECT_EQ(c.prompt_lookup_min, 4);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
}

TEST(SpeculativeConfig, ReadsDraftModel) {
  SpeculativeConfig c =
      parse_speculative_config(R"({"model": "/models/Qwen2.5-0.5B", "num_speculative_tokens": 4})");
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.model, "/models/Qwen2.5-0.5B");
  EXPECT_EQ(c.num_tokens, 4);
  c = parse_speculative_config(
      R"({"method": "draft_model", "model": "d", "num_speculative_tokens": 2})");
  EXPECT_EQ(c.model, "d");
  EXPECT_EQ(c.num_tokens, 2);
  // vLLM's draft_tensor_parallel_size: 1 is what qmpi does.
  c = parse_speculative_config(
      R"({"model": "d", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})");
  EXPECT_EQ(c.model, "d");
  // Prompt lookup names no model.
  EXPECT_TRUE(parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})")
                  .model.empty());
}

TEST(SpeculativeConfig, RefusesWhatQmpiCannotDo) {
  const auto refused = [](const std::string& text, const std::string& needle) {
    testing::expect_error([&] { parse_speculative_config(text); }, Err::Usage,
                          {"--speculative-config", needle});
  };
  refused("{method: ngram}", "not JSON");
  refused("[1]", "JSON object");
  refused(R"({"model": "/models/Qwen2.5-0.5B"})", "num_speculative_tokens");
  refused(R"({"model": "", "num_speculative_tokens": 4})", "draft model's folder");
  refused(R"({"model": 3, "num_speculative_tokens": 4})", "draft model's folder");
  refused(R"({"method": "ngram", "model": "d", "num_speculative_tokens": 4})", "does not go with");
  refused(R"({"model": "d", "num_speculative_tokens": 4, "prompt_lookup_max": 3})",
          "not a draft model's");
  refused(R"({"model": "d", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 2})",
          "only 1 is possible");
  refused(R"({"method": "ngram", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 1})",
          "goes with a draft model");
  refused(R"({"method": "eagle", "num_speculative_tokens": 4})", "\"eagle\"");
  refused(R"({"method": "ngram"})", "num_speculative_tokens");
  refused(R"({"method": "ngram", "num_speculative_tokens": 0})", "from 1 to 32");
  refused(R"({"method": "ngram", "num_speculative_tokens": 2.5})", "2.5");
  refused(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 4,
              "prompt_lookup_max": 2})",
          "above prompt_lookup_max");
  refused(R"({"method": "ngram", "num_speculative_tokens": 4, "acceptance": "typical"})",
          "\"acceptance\"");
}

}  // namespace
}  // namespace qmpi
