#include "text/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "text_test_util.h"

namespace qmpi {
namespace {

using test::QwenTokenizerTest;
using ::testing::HasSubstr;

const std::string kDefaultHello =
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";

TEST(Qwen25ChatTemplate, InsertsTheDefaultSystemPrompt) {
  const std::vector<ChatMessage> msgs{{"user", "Hello"}};
  EXPECT_EQ(Qwen25ChatTemplate().render(msgs, true), kDefaultHello);
}

TEST(Qwen25ChatTemplate, KeepsAGivenSystemPrompt) {
  const std::vector<ChatMessage> msgs{{"system", "You are a helpful assistant."},
                                      {"user", "Hello"}};
  EXPECT_EQ(Qwen25ChatTemplate().render(msgs, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
            "Hello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Qwen25ChatTemplate, MultiTurnWithoutGenerationPrompt) {
  const std::vector<ChatMessage> msgs{
      {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}, {"system", "Be brief."}};
  EXPECT_EQ(Qwen25ChatTemplate().render(msgs, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>system\nBe "
            "brief.<|im_end|>\n");
  EXPECT_EQ(Qwen25ChatTemplate().render({}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Qwen25ChatTemplate, RejectsUnknownRoles) {
  const std::vector<ChatMessage> msgs{{"user", "Hi"}, {"tool", "{}"}};
  try {
    Qwen25ChatTemplate().render(msgs, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RequestField);
    EXPECT_THAT(e.message(), HasSubstr("message 1 has role 'tool'"));
  }
}

TEST(ChatTemplateFor, GivesTheQwen25TemplateForNow) {
  const auto t = chat_template_for("/any/model");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->render(std::vector<ChatMessage>{{"user", "Hello"}}, true), kDefaultHello);
}

TEST_F(QwenTokenizerTest, ChatPromptIdsMatchTheFactsSheet) {
  const std::vector<int32_t> expected{151644, 8948,   198,   2610,   525,   1207,   16948, 11,
                                      3465,   553,    54364, 14817,  13,    1446,   525,   264,
                                      10950,  17847,  13,    151645, 198,   151644, 872,   198,
                                      9707,   151645, 198,   151644, 77091, 198};
  EXPECT_EQ(
      tok().encode(Qwen25ChatTemplate().render(std::vector<ChatMessage>{{"user", "Hello"}}, true)),
      expected);
}

}  // namespace
}  // namespace qmpi
