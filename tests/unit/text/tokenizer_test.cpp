// The real Qwen tokenizer. Expected ids were checked against Hugging Face's `tokenizers`
// (tests/reference/hf_tokenize.js) before they were written here.
#include "text/tokenizer.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "text_test_util.h"

namespace qmpi {
namespace {

using test::QwenTokenizerTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

TEST_F(QwenTokenizerTest, FactsSheetVectors) {
  EXPECT_EQ(tok().encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(tok().encode(" Hello world"), (Ids{21927, 1879}));
  EXPECT_EQ(tok().encode("1234567 apples"), (Ids{16, 17, 18, 19, 20, 21, 22, 40676}));
  EXPECT_EQ(tok().encode("na\u00EFve caf\u00E9 \u4F60\u597D"),
            (Ids{3376, 37572, 586, 51950, 220, 108386}));
  EXPECT_EQ(tok().encode("  \n\n  x"), (Ids{18611, 220, 856}));
  EXPECT_EQ(tok().encode("\n\n"), (Ids{271}));
  EXPECT_EQ(tok().encode("<think>\n\n</think>\n\n"), (Ids{151667, 271, 151668, 271}));
  EXPECT_TRUE(tok().encode("").empty());
}

TEST_F(QwenTokenizerTest, VocabularyAndSpecialIds) {
  EXPECT_EQ(tok().vocab_size(), 151669);  // Qwen3's file: 151643 regular + 26 added
  EXPECT_EQ(tok().eos_id(), 151645);      // <|im_end|>
  EXPECT_EQ(tok().pad_id(), 151643);      // <|endoftext|>
  EXPECT_EQ(tok().token_to_id("\u0120world"), 1879);
  EXPECT_EQ(tok().id_to_token(1879), "\u0120world");
  EXPECT_EQ(tok().token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok().id_to_token(151644), "<|im_start|>");
  EXPECT_FALSE(tok().token_to_id("no such token").has_value());
  EXPECT_FALSE(tok().id_to_token(151669).has_value());
  EXPECT_FALSE(tok().id_to_token(-1).has_value());
  EXPECT_TRUE(tok().is_special(151643));
  EXPECT_TRUE(tok().is_special(151656));   // <|video_pad|>, the last special one
  EXPECT_FALSE(tok().is_special(151657));  // <tool_call>: added, not special
  EXPECT_FALSE(tok().is_special(9707));
  EXPECT_EQ(tok().token_bytes(1879), " world");
}

TEST_F(QwenTokenizerTest, SpecialTokenParsingOnAndOff) {
  EXPECT_EQ(tok().encode("<|im_start|>user"), (Ids{151644, 872}));
  // Off: special tokens are spelled out; non-special added tokens still match whole, as with
  // Hugging Face's split_special_tokens.
  EXPECT_EQ(tok().encode("<|im_start|>user", false), (Ids{27, 91, 318, 4906, 91, 29, 872}));
  EXPECT_EQ(tok().encode("<tool_call>", false), (Ids{151657}));
  EXPECT_EQ(tok().encode("<|im_start|"), (Ids{27, 91, 318, 4906, 91}));
  EXPECT_EQ(tok().encode("<|endoftext|><|endoftext|>"), (Ids{151643, 151643}));
}

TEST_F(QwenTokenizerTest, DecodeWithAndWithoutSpecialTokens) {
  const Ids ids{151644, 872, 198, 9707, 151645, 151657};
  EXPECT_EQ(tok().decode(ids), "<|im_start|>user\nHello<|im_end|><tool_call>");
  EXPECT_EQ(tok().decode(ids, true), "user\nHello<tool_call>");
  EXPECT_EQ(tok().decode(Ids{}), "");
}

TEST_F(QwenTokenizerTest, DecodeReplacesCutCharacters) {
  // "你" is E4 BD A0; its first two bytes alone decode to one U+FFFD, as in Hugging Face.
  const auto e4 = tok().token_to_id(test::bl("\xE4"));
  const auto bd = tok().token_to_id(test::bl("\xBD"));
  ASSERT_TRUE(e4 && bd);
  EXPECT_EQ(tok().decode(Ids{*e4, *bd}), "\uFFFD");
  EXPECT_EQ(tok().decode(Ids{*e4, 9707}), "\uFFFDHello");
}

TEST_F(QwenTokenizerTest, RegexWhitespaceIsUnicodeWhiteSpace) {
  // U+180E is not White_Space (Hugging Face's regex engine agrees); PCRE2's own \s would say
  // it is and split these differently.
  EXPECT_EQ(tok().encode("a \u180E"
                         "b"),
            (Ids{64, 86089, 254, 236, 65}));
  EXPECT_EQ(tok().encode("x\u180E\u180E y"), (Ids{87, 123970, 236, 123970, 236, 379}));
  EXPECT_EQ(tok().encode("\uFEFFhi\u00A0there\u3000!"), (Ids{3225, 6023, 4102, 18532, 22441, 0}));
}

TEST_F(QwenTokenizerTest, ContractionsIgnoreCase) {
  EXPECT_EQ(tok().encode("IT'S WE'LL they're"), (Ids{952, 13272, 19677, 6, 4086, 807, 2299}));
}

TEST_F(QwenTokenizerTest, NormalizesToNfc) {
  EXPECT_EQ(tok().encode("e\u0301"), tok().encode("\u00E9"));
  EXPECT_EQ(tok().decode(tok().encode("cafe\u0301")), "caf\u00E9");
}

TEST_F(QwenTokenizerTest, LongLineRoundTrips) {
  std::string text;
  for (int i = 0; i < 8; ++i) {
    text += std::string(3000, ' ') + "x" + std::string(2000, 'a') + "\n\n\n";
    for (int k = 0; k < 500; ++k) text += "\u597D";
    text += std::string(500, '7') + std::string(500, '!') + "\t\t \U0001F600\U0001F600";
  }
  ASSERT_GT(text.size(), 50000u);
  const Ids ids = tok().encode(text);
  EXPECT_LT(ids.size(), text.size() / 2);  // merges happened
  EXPECT_EQ(tok().decode(ids), text);
}

TEST_F(QwenTokenizerTest, ConcurrentEncodesAgree) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("line " + std::to_string(i) + ": \u4F60\u597D world's " +
                    std::string(i % 7, ' ') + "end\n");
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(tok().encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < texts.size(); ++i)
          mismatches[w] += tok().encode(texts[(i * 7 + w) % texts.size()]) !=
                           expected[(i * 7 + w) % texts.size()];
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST_F(QwenTokenizerTest, BadInputsGetRequestErrors) {
  try {
    tok().encode("ok\xC3");
    FAIL() << "invalid UTF-8 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RequestField);
    EXPECT_THAT(e.message(), HasSubstr("offset 2"));
  }
  try {
    tok().decode(Ids{9707, 151669});
    FAIL() << "an id past the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RequestField);
    EXPECT_THAT(e.message(), HasSubstr("151669"));
  }
  EXPECT_THROW(tok().decode(Ids{-3}), Error);
}

TEST(TokenizerLoad, MissingFileNamesThePath) {
  try {
    Tokenizer::load("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::TokenizerMissing);
    EXPECT_THAT(e.message(), HasSubstr("/nonexistent/model does not exist"));
  }
  const auto empty =
      std::filesystem::temp_directory_path() / ("qmpi_tok_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(empty);
  try {
    Tokenizer::load(empty.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::TokenizerMissing);
    EXPECT_THAT(e.message(), HasSubstr(empty.string() + " has no tokenizer.json"));
  }
  std::filesystem::remove_all(empty);
}

TEST(TokenizerLoad, AFolderIsReadThroughItsTokenizerJson) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("qmpi_tok_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << test::tiny_tokenizer({{"h", "i"}}).dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": {"content": "hi"},
                                                      "pad_token": null})";
  const Tokenizer t = Tokenizer::load(dir.string());
  EXPECT_EQ(t.encode("hi"), (Ids{256}));
  EXPECT_EQ(t.eos_id(), 256);
  EXPECT_FALSE(t.pad_id().has_value());
  EXPECT_EQ(t.source(), (dir / "tokenizer.json").string());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qmpi
