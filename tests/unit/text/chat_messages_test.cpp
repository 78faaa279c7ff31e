// A chat request's messages brought to the shape templates expect, or refused with the field.
#include "text/chat_messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"

namespace qmpi {
namespace {

using OJson = nlohmann::ordered_json;
using ::testing::HasSubstr;

TEST(ChatMessages, TextPartsAreJoinedAndOtherFieldsKept) {
  const OJson in = OJson::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}], "reasoning_content": "r"}])");
  const OJson out = normalize_chat_messages(in);
  EXPECT_EQ(out[0]["content"], "a\nb");
  EXPECT_EQ(out[1]["content"], "") << "null content reaches templates as \"\", as in vLLM";
  EXPECT_EQ(out[1]["reasoning_content"], "r");
  EXPECT_EQ(out[1].begin().key(), "role");  // the request's key order is kept
  const std::vector<ChatMessage> list = chat_message_list(out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].role, "assistant");
  EXPECT_EQ(list[1].content, "");
}

TEST(ChatMessages, RefusesShapesTemplatesCannotUse) {
  for (const char* bad : {R"({"role": "user"})", R"([5])", R"([{"content": "x"}])",
                          R"([{"role": "user", "content": 5}])",
                          R"([{"role": "user", "content": [{"type": "image_url"}]}])",
                          R"([{"role": "assistant", "content": "", "tool_calls": {}}])"}) {
    try {
      normalize_chat_messages(OJson::parse(bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::RequestField) << bad;
    }
  }
}

TEST(ChatMessages, DeveloperIsSystemAndUnknownRolesAreRefused) {
  const OJson out = normalize_chat_messages(
      OJson::parse(R"([{"role": "developer", "content": "be brief"}, {"role": "user"}])"));
  EXPECT_EQ(out[0]["role"], "system") << "OpenAI's developer message is a system message";
  for (const char* role : {"function", "Developer", "USER", "", "bot"}) {
    OJson in = OJson::array({{{"role", role}, {"content", "x"}}});
    try {
      normalize_chat_messages(in);
      ADD_FAILURE() << role << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::RequestField) << role;
      EXPECT_THAT(e.message(), HasSubstr("\"user\", \"assistant\" or \"tool\"")) << role;
    }
  }
}

}  // namespace
}  // namespace qmpi
