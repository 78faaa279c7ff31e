// --speculative-config: vLLM's JSON for prompt lookup is read, its defaults follow vLLM's, and
// what qmpi cannot do (a draft model, EAGLE, unknown keys, numbers out of range) is refused
// with Usage naming the problem.
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

TEST(SpeculativeConfig, RefusesWhatQmpiCannotDo) {
  const auto refused = [](const std::string& text, const std::string& needle) {
    testing::expect_error([&] { parse_speculative_config(text); }, Err::Usage,
                          {"--speculative-config", needle});
  };
  refused("{method: ngram}", "not JSON");
  refused("[1]", "JSON object");
  refused(R"({"model": "/models/Qwen2.5-0.5B", "num_speculative_tokens": 4})", "draft model");
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
