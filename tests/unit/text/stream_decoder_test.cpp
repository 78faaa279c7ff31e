#include "text/stream_decoder.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "text_test_util.h"

namespace qmpi {
namespace {

using test::QwenTokenizerTest;
using Ids = std::vector<int32_t>;

class StreamDecoderTest : public QwenTokenizerTest {
 protected:
  int32_t byte_id(uint8_t b) const {
    return *tok().token_to_id(test::bl(std::string(1, static_cast<char>(b))));
  }
};

TEST_F(StreamDecoderTest, ChineseAndEmojiSplitAcrossTokens) {
  const std::string text =
      "\u4F60\u597D\uFF0C\u4E16\u754C\U0001F600 family \U0001F468\u200D\U0001F469\u200D"
      "\U0001F467 \u9F98\u9F49 done";
  const Ids ids = tok().encode(text);
  StreamDecoder dec(tok());
  std::string streamed;
  int held_back = 0;  // pushes that completed no character
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_EQ(utf8::find_invalid(piece), piece.size()) << "half a character after id " << id;
    EXPECT_EQ(piece.find("\uFFFD"), std::string::npos) << "premature U+FFFD after id " << id;
    held_back += piece.empty();
    streamed += piece;
  }
  streamed += dec.flush();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(streamed, tok().decode(ids));
  EXPECT_GT(held_back, 0) << "the text should contain characters split across tokens";
}

TEST_F(StreamDecoderTest, OneByteAtATime) {
  StreamDecoder dec(tok());
  // U+1F600 is F0 9F 98 80.
  EXPECT_EQ(dec.push(byte_id(0xF0)), "");
  EXPECT_EQ(dec.push(byte_id(0x9F)), "");
  EXPECT_EQ(dec.push(byte_id(0x98)), "");
  EXPECT_EQ(dec.push(byte_id(0x80)), "\U0001F600");
  EXPECT_EQ(dec.push(byte_id(0xE4)), "");
  EXPECT_EQ(dec.push(9707), "\uFFFDHello");  // the next token proves E4 cannot complete
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(StreamDecoderTest, FlushReplacesACutCharacter) {
  StreamDecoder dec(tok());
  EXPECT_EQ(dec.push(9707), "Hello");
  EXPECT_EQ(dec.push(byte_id(0xE4)), "");
  EXPECT_EQ(dec.push(byte_id(0xBD)), "");
  EXPECT_EQ(dec.flush(), "\uFFFD");
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(StreamDecoderTest, SkipsSpecialTokensWhenAsked) {
  StreamDecoder keep(tok());
  StreamDecoder skip(tok(), true);
  EXPECT_EQ(keep.push(151645), "<|im_end|>");
  EXPECT_EQ(skip.push(151645), "");
  EXPECT_EQ(skip.push(151657), "<tool_call>");  // not special
  EXPECT_THROW(skip.push(151669), Error);
}

}  // namespace
}  // namespace qmpi
