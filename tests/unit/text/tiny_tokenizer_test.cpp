// Tokenizer mechanics on small tokenizer.json files built in the test. Expected ids for the
// added-token cases were checked against Hugging Face's `tokenizers` on the same file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "text/tokenizer.h"
#include "text_test_util.h"

namespace qmpi {
namespace {

using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;
using test::added_token;
using test::bl;
using test::from;
using test::tiny_tokenizer;

const std::vector<std::pair<std::string, std::string>> kHelloMerges = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {bl(" "), "w"}};

TEST(TinyTokenizer, MergesInStringAndPairFormGiveTheSameIds) {
  const Tokenizer strings = from(tiny_tokenizer(kHelloMerges, false));
  const Tokenizer pairs = from(tiny_tokenizer(kHelloMerges, true));
  for (const char* text : {"hello", "hello world", "hellohello  hell", "ll he", ""}) {
    EXPECT_EQ(strings.encode(text), pairs.encode(text)) << text;
  }
  EXPECT_EQ(strings.encode("hello"), (Ids{259}));
  EXPECT_EQ(strings.encode("hello world"), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(strings.decode(Ids{259, 260}), "hello w");
}

TEST(TinyTokenizer, LowerMergeRankWins) {
  // "xyz": with x+y ranked first the result is xy|z; with y+z first it is x|yz.
  const Tokenizer xy = from(tiny_tokenizer({{"x", "y"}, {"y", "z"}}));
  const Tokenizer yz = from(tiny_tokenizer({{"y", "z"}, {"x", "y"}}));
  EXPECT_EQ(xy.id_to_token(xy.encode("xyz")[0]), "xy");
  EXPECT_EQ(xy.encode("xyz").size(), 2u);
  EXPECT_EQ(yz.encode("xyz"), (Ids{'x', 256}));  // 256 = "yz", the first merge's result
  // Equal ranks merge leftmost first: "aaa" -> aa|a.
  const Tokenizer aa = from(tiny_tokenizer({{"a", "a"}}));
  EXPECT_EQ(aa.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(aa.encode("aaaa"), (Ids{256, 256}));
}

TEST(TinyTokenizer, LongPieceMergesCompletely) {
  const Tokenizer t = from(tiny_tokenizer({{"a", "a"}, {"aa", "aa"}, {"aaaa", "aaaa"}}));
  const Ids ids = t.encode(std::string(40001, 'a'));
  ASSERT_EQ(ids.size(), 5001u);  // 5000 x "aaaaaaaa" + "a"
  EXPECT_EQ(ids.front(), 258);
  EXPECT_EQ(ids.back(), 'a');
}

// The added-token flags, on the file Hugging Face was run with: "é" is already a vocab entry
// (byte 0xE9's symbol) so it keeps that id; "<s p>" strips whitespace on both sides; "cafe\u0301"
// is normalized, so it matches the NFC text only; "ab" must stand alone as a word.
nlohmann::json flags_tokenizer() {
  nlohmann::json added = nlohmann::json::array();
  added.push_back(added_token(233, "\u00E9", false));
  added.push_back(added_token(260, "<s p>", true, false, true, true));
  added.push_back(added_token(261, "cafe\u0301", false, true));
  added.push_back(added_token(262, "ab", false, false, false, false, true));
  return tiny_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}, false, added);
}

TEST(TinyTokenizer, AddedTokenFlagsMatchHuggingFace) {
  const Tokenizer t = from(flags_tokenizer());
  EXPECT_EQ(t.vocab_size(), 263);
  EXPECT_EQ(t.encode("hello \u00E9 x"), (Ids{259, 32, 233, 32, 120}));
  EXPECT_EQ(t.encode("x  <s p>  y"), (Ids{120, 260, 121}));
  EXPECT_EQ(t.encode("caf\u00E9 cafe\u0301"), (Ids{99, 97, 102, 233, 32, 261}));
  EXPECT_EQ(t.encode("ab xab ab, ab_ ab\u0301"),
            (Ids{262, 32, 120, 97, 98, 32, 262, 44, 32, 97, 98, 95, 32, 97, 98, 204, 129}));
  // With special parsing off "<s p>" is text, and its stripping goes with it.
  EXPECT_EQ(t.encode("x <s p> y"), (Ids{120, 260, 121}));
  EXPECT_EQ(t.decode(t.encode("x <s p> y", false)), "x <s p> y");
  EXPECT_EQ(t.decode(t.encode("x <s p> y")), "x<s p>y");
}

TEST(TinyTokenizer, DecodeFollowsTheByteLevelDecoder) {
  const Tokenizer t = from(flags_tokenizer());
  EXPECT_EQ(t.decode(Ids{260, 257}), "<s p>ll");
  EXPECT_EQ(t.decode(Ids{260, 257}, true), "ll");
  // The normalized token is stored as NFC "café", whose é is an alphabet character standing
  // for the single byte E9: Hugging Face decodes it to "caf" + U+FFFD, and so do we.
  EXPECT_EQ(t.decode(Ids{261}), "caf\uFFFD");
  EXPECT_EQ(t.decode(Ids{0xC3, 0xA9}), "\u00E9");
}

TEST(TinyTokenizer, RegexThatNeedsADeepBacktrackingStack) {
  // A repeated group keeps one backtracking frame per repetition: 200,000 of them overflow the
  // JIT's default 32 KiB stack, and the splitter must retry with a larger one, not fail.
  auto j = tiny_tokenizer({{"a", "a"}});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"((a|b)+|\s+|.)";
  const Tokenizer t = from(j);
  const std::string text = std::string(200000, 'a') + " b";
  const Ids ids = t.encode(text);
  EXPECT_EQ(ids.size(), 100000u + 2u);
  EXPECT_EQ(t.decode(ids), text);
}

void expect_invalid(const nlohmann::json& j, const std::string& needle,
                    const std::string& config = "") {
  try {
    from(j, config);
    FAIL() << "accepted a tokenizer that should fail with: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::TokenizerInvalid) << e.what();
    EXPECT_THAT(e.message(), HasSubstr("tiny/tokenizer")) << "the file is named";
    EXPECT_THAT(e.message(), HasSubstr(needle));
  }
}

TEST(TinyTokenizer, RejectsWhatItCannotReproduce) {
  auto base = [] { return tiny_tokenizer(kHelloMerges); };
  try {
    Tokenizer::from_json("{not json", "", "tiny/tokenizer.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::TokenizerInvalid);
    EXPECT_THAT(e.message(), HasSubstr("not valid JSON"));
  }
  auto j = base();
  j["model"]["merges"].push_back("q zz");
  expect_invalid(j, "'zz', which is not in the vocab");
  j = base();
  j["model"]["merges"].push_back("q");
  expect_invalid(j, "not two tokens");
  j = base();
  j["normalizer"] = {{"type", "NFKC"}};
  expect_invalid(j, "'NFKC' is not supported");
  j = base();
  j["model"]["vocab"].erase(bl("\n"));
  expect_invalid(j, "byte 0x0A");
  j = base();
  j["model"]["type"] = "WordPiece";
  expect_invalid(j, "'WordPiece' is not supported");
  j = base();
  j["model"]["byte_fallback"] = true;
  expect_invalid(j, "byte_fallback");
  j = base();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  expect_invalid(j, "Sequence of Split");
  j = base();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_invalid(j, "Isolated");
  j = base();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_invalid(j, "does not compile");
  j = base();
  j["decoder"] = nullptr;
  expect_invalid(j, "decoder must be ByteLevel");
  j = base();
  j["model"]["vocab"]["dup"] = 3;
  expect_invalid(j, "vocab id 3 is used twice");
  j = base();
  j["added_tokens"].push_back(added_token(300, "<x>", true));  // Hugging Face would say 261
  expect_invalid(j, "declares id 300");
  expect_invalid(base(), "eos_token '<none>' is not a token", R"({"eos_token": "<none>"})");
}

}  // namespace
}  // namespace qmpi
