// A draft model's tokenizer against the model's (requests/draft_tokenizer.h): the same tokenizer
// agrees; a changed token, a missing or extra added token, a token special in one only, or
// another eos each give one sentence naming the first difference.
#include <gtest/gtest.h>

#include "../text/text_test_util.h"
#include "requests/draft_tokenizer.h"

namespace qmpi {
namespace {

using test::added_token;
using test::from;
using test::tiny_tokenizer;

const std::vector<std::pair<std::string, std::string>> kMerges = {{"a", "b"}, {"c", "d"}};

nlohmann::json base() {
  return tiny_tokenizer(kMerges, false,
                        {added_token(258, "<|end|>", true), added_token(259, "<tool>", false)});
}

std::string difference(const nlohmann::json& draft, const std::string& draft_config = "") {
  const Tokenizer t = from(base());
  return tokenizer_difference(t, from(draft, draft_config)).value_or("");
}

TEST(DraftTokenizer, TheSameTokenizerAgrees) {
  EXPECT_EQ(difference(base()), "");
}

TEST(DraftTokenizer, NamesTheFirstDifference) {
  // Other merges: token 257 is "cd" for the model and "dc" for the draft.
  nlohmann::json other =
      tiny_tokenizer({{"a", "b"}, {"d", "c"}}, false,
                     {added_token(258, "<|end|>", true), added_token(259, "<tool>", false)});
  EXPECT_NE(difference(other).find("token id 257 is 'cd' for the model and 'dc'"),
            std::string::npos)
      << difference(other);
  // One added token fewer: a smaller vocabulary.
  nlohmann::json fewer = tiny_tokenizer(kMerges, false, {added_token(258, "<|end|>", true)});
  EXPECT_NE(difference(fewer).find("260 tokens, the draft's 259"), std::string::npos)
      << difference(fewer);
  // The same spelling, special in the draft only.
  nlohmann::json special = tiny_tokenizer(
      kMerges, false, {added_token(258, "<|end|>", true), added_token(259, "<tool>", true)});
  EXPECT_NE(difference(special).find("'<tool>') is special for the draft only"), std::string::npos)
      << difference(special);
  // The same vocabulary, another eos.
  EXPECT_NE(difference(base(), R"({"eos_token": "<|end|>"})").find("eos token is id none"),
            std::string::npos)
      << difference(base(), R"({"eos_token": "<|end|>"})");
}

}  // namespace
}  // namespace qmpi
