// One streamed response's text: role chunks, deltas, finish chunks, usage, [DONE]; an error ends
// it; nothing follows the end.
#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "serve/sse_writer.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

std::vector<std::string> events_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << text.substr(at);
    if (end == std::string::npos) break;
    EXPECT_EQ(text.compare(at, 6, "data: "), 0) << text.substr(at, end - at);
    out.push_back(text.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return out;
}

ServeEvent make(ServeEvent::Kind kind) {
  ServeEvent e;
  e.kind = kind;
  return e;
}

ServeEvent final_of(int choices) {
  ServeEvent e = make(ServeEvent::Kind::Final);
  auto out = std::make_shared<RequestOutput>();
  out->prompt_tokens = 2;
  out->choices.resize(size_t(choices));
  for (auto& c : out->choices) {
    c.tokens = {7, 8};
    c.finish_reason = "length";
  }
  e.result = out;
  return e;
}

StreamShape chat_shape() {
  StreamShape s;
  s.endpoint = Endpoint::Chat;
  s.id = "chatcmpl-1";
  s.model = "m";
  return s;
}

TEST(SseWriter, ChatStreamInOrder) {
  SseWriter w(chat_shape(), 2, true);
  std::string out;
  w.write(make(ServeEvent::Kind::Accepted), out);
  ServeEvent d = make(ServeEvent::Kind::Delta);
  d.index = 1;
  d.text = "hi";
  w.write(d, out);
  EXPECT_FALSE(w.done());
  w.write(final_of(2), out);
  EXPECT_TRUE(w.done());
  const auto ev = events_of(out);
  // 2 role chunks, 1 delta, 2 finish chunks, usage, [DONE]
  ASSERT_EQ(ev.size(), 7u) << out;
  EXPECT_EQ(json::parse(ev[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(json::parse(ev[1])["choices"][0]["index"], 1);
  EXPECT_EQ(json::parse(ev[2])["choices"][0]["delta"]["content"], "hi");
  EXPECT_EQ(json::parse(ev[4])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(ev[5])["usage"]["completion_tokens"], 4);
  EXPECT_EQ(ev[6], "[DONE]");
  const size_t size = out.size();
  w.write(d, out);
  w.fail(Error(Err::ClientTooSlow, "late"), out);
  EXPECT_EQ(out.size(), size) << "nothing follows [DONE]";
}

TEST(SseWriter, CompletionsHaveNoRoleChunkAndUsageOnlyWhenAsked) {
  StreamShape s = chat_shape();
  s.endpoint = Endpoint::Completion;
  SseWriter w(s, 1, false);
  std::string out;
  w.write(make(ServeEvent::Kind::Accepted), out);
  EXPECT_EQ(out, "");
  w.write(final_of(1), out);
  const auto ev = events_of(out);
  ASSERT_EQ(ev.size(), 2u) << out;
  EXPECT_EQ(json::parse(ev[0])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ev[1], "[DONE]");
}

TEST(SseWriter, AnErrorEndsTheStream) {
  SseWriter w(chat_shape(), 1, true);
  std::string out;
  w.write(make(ServeEvent::Kind::Accepted), out);
  ServeEvent e = make(ServeEvent::Kind::Error);
  e.error = Error(Err::CommTimeout, "rank 3 stopped answering");
  w.write(e, out);
  EXPECT_TRUE(w.done());
  w.write(final_of(1), out);
  const auto ev = events_of(out);
  ASSERT_EQ(ev.size(), 3u) << out;
  EXPECT_EQ(json::parse(ev[1])["error"]["qmpi_code"], "QM402");
  EXPECT_EQ(ev[2], "[DONE]");
}

}  // namespace
}  // namespace qmpi
