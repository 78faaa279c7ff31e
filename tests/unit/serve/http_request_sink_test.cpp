// The queue between the engine and one HTTP request: one wake per batch of events, deltas
// dropped for a response that is not streamed, and a bound past which only the end is kept.
#include <gtest/gtest.h>

#include "serve/http_request_sink.h"

namespace qmpi {
namespace {

ServeEvent delta(const std::string& text) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Delta;
  e.text = text;
  return e;
}

ServeEvent last(ServeEvent::Kind kind) {
  ServeEvent e;
  e.kind = kind;
  if (kind == ServeEvent::Kind::Error) e.error = Error(Err::Busy, "full");
  return e;
}

TEST(HttpRequestSink, WakesOncePerBatchTaken) {
  int wakes = 0;
  HttpRequestSink sink(true, 1 << 20, [&] { ++wakes; });
  sink.deliver(last(ServeEvent::Kind::Accepted));
  sink.deliver(delta("a"));
  sink.deliver(delta("b"));
  EXPECT_EQ(wakes, 1) << "the connection takes everything on one wake";
  auto got = sink.take();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].text, "b");
  sink.deliver(delta("c"));
  EXPECT_EQ(wakes, 2);
  EXPECT_TRUE(sink.take().size() == 1 && sink.take().empty());
}

TEST(HttpRequestSink, AResponseThatDoesNotStreamKeepsNoDeltas) {
  int wakes = 0;
  HttpRequestSink sink(false, 1 << 20, [&] { ++wakes; });
  sink.deliver(delta("a"));
  EXPECT_EQ(wakes, 0);
  sink.deliver(last(ServeEvent::Kind::Final));
  auto got = sink.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, ServeEvent::Kind::Final);
}

TEST(HttpRequestSink, PastItsBoundOnlyTheEndIsKept) {
  HttpRequestSink sink(true, 1000, [] {});
  for (int i = 0; i < 100; ++i) sink.deliver(delta(std::string(50, 'x')));
  EXPECT_TRUE(sink.overflowed());
  sink.deliver(last(ServeEvent::Kind::Final));
  auto got = sink.take();
  EXPECT_LT(got.size(), 20u) << "queued text is bounded";
  EXPECT_EQ(got.back().kind, ServeEvent::Kind::Final) << "the end still arrives";
  EXPECT_TRUE(sink.overflowed()) << "the connection learns it, whenever it takes";
}

}  // namespace
}  // namespace qmpi
