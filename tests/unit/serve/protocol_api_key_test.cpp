// A server with an API key refuses ZeroMQ generate and cancel messages without it, with the
// catalogue code HTTP uses and the message's id in the reply; health and stats stay open.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/api_key.h"
#include "serve/protocol.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

constexpr const char* kKey = "s3cret-key";

// The reply the broker sends for `text` when parsing it fails; "" when it parses.
std::string reply_of(const std::string& text, std::string_view key = kKey) {
  std::string id;
  try {
    parse_client_message(text, id, key);
  } catch (const Error& e) {
    return error_message(id, e);
  }
  return "";
}

TEST(ProtocolApiKey, RefusesGenerateWithoutTheKeyCarryingTheId) {
  for (const char* text : {R"({"type": "generate", "id": "a1", "prompt": "hi"})",
                           R"({"type": "generate", "id": "a1", "prompt": "hi", "api_key": "no"})",
                           R"({"id": "a1", "prompt": "hi", "api_key": "s3cret-ke"})",
                           R"({"id": "a1", "prompt": "hi", "api_key": 7})",
                           R"({"id": "a1", "prompt": "hi", "api_key": ["s3cret-key"]})"}) {
    const json reply = json::parse(reply_of(text));
    EXPECT_EQ(reply["type"], "error") << text;
    EXPECT_EQ(reply["code"], error_id(Err::Unauthorized)) << text;
    EXPECT_EQ(reply["id"], "a1") << text;
  }
}

TEST(ProtocolApiKey, TheKeyIsCheckedBeforeTheRestOfTheMessage) {
  // An unknown field would be RequestField; a caller without the key learns nothing from it.
  const json reply = json::parse(reply_of(R"({"id": 5, "prompt": "hi", "bogus": 1})"));
  EXPECT_EQ(reply["code"], error_id(Err::Unauthorized));
  EXPECT_EQ(reply["id"], 5);
}

TEST(ProtocolApiKey, RefusesCancelWithoutTheKey) {
  const json reply = json::parse(reply_of(R"({"type": "cancel", "id": "a1"})"));
  EXPECT_EQ(reply["code"], error_id(Err::Unauthorized));
}

TEST(ProtocolApiKey, AcceptsTheKeyAndTakesItOutOfTheRequest) {
  std::string id;
  const ClientMessage m = parse_client_message(
      R"({"type": "generate", "id": "a1", "prompt": "hi", "api_key": "s3cret-key"})", id, kKey);
  EXPECT_EQ(m.type, MessageType::Generate);
  EXPECT_EQ(m.request.prompt, "hi");
  EXPECT_EQ(
      parse_client_message(R"({"type": "cancel", "id": "a1", "api_key": "s3cret-key"})", id, kKey)
          .type,
      MessageType::Cancel);
}

TEST(ProtocolApiKey, HealthAndStatsStayOpenAndMayCarryTheKey) {
  std::string id;
  EXPECT_EQ(parse_client_message(R"({"type": "health"})", id, kKey).type, MessageType::Health);
  EXPECT_EQ(parse_client_message(R"({"type": "stats", "api_key": "x"})", id, kKey).type,
            MessageType::Stats);
}

TEST(ProtocolApiKey, AServerWithoutAKeyIgnoresOneSent) {
  std::string id;
  const ClientMessage m =
      parse_client_message(R"({"id": "a1", "prompt": "hi", "api_key": "anything"})", id, "");
  EXPECT_EQ(m.request.prompt, "hi");
  EXPECT_EQ(json::parse(reply_of(R"({"id": "a1", "prompt": "hi", "api_key": 7})", ""))["code"],
            error_id(Err::RequestField));
}

TEST(ProtocolApiKey, KeysMatchOnlyWhenEqual) {
  EXPECT_TRUE(api_key_matches("abc", "abc"));
  EXPECT_FALSE(api_key_matches("abd", "abc"));
  EXPECT_FALSE(api_key_matches("ab", "abc"));
  EXPECT_FALSE(api_key_matches("abcd", "abc"));
  EXPECT_FALSE(api_key_matches("", "abc"));
}

}  // namespace
}  // namespace qmpi
