// Which decode steps the CUDA backend records as graphs and when it replays them
// (backend/cuda/graph_book.h), without a device.
#include "backend/cuda/graph_book.h"

#include <gtest/gtest.h>

#include <limits>

namespace qmpi::cuda {
namespace {

StepShape decode(int64_t tokens, int32_t context) {
  return StepShape{tokens, true, context};
}

TEST(GraphBook, OnlyDecodeStepsOfFewTokensHaveAKey) {
  EXPECT_FALSE(graph_key(StepShape{}));
  EXPECT_FALSE(graph_key(StepShape{128, false, 128})) << "a prefill";
  EXPECT_FALSE(graph_key(decode(0, 10)));
  EXPECT_FALSE(graph_key(decode(kGraphMaxTokens + 1, 10)));
  ASSERT_TRUE(graph_key(decode(kGraphMaxTokens, 10)));
  const GraphKey k = *graph_key(decode(3, 700));
  EXPECT_EQ(k.tokens, 3);
  EXPECT_EQ(k.context, 1024);
}

TEST(GraphBook, ContextBoundIsAPowerOfTwoAtLeastTheMinimum) {
  EXPECT_EQ(graph_context(0), kGraphMinContext);
  EXPECT_EQ(graph_context(1), kGraphMinContext);
  EXPECT_EQ(graph_context(kGraphMinContext), kGraphMinContext);
  EXPECT_EQ(graph_context(kGraphMinContext + 1), 2 * kGraphMinContext);
  EXPECT_EQ(graph_context(4096), 4096);
  EXPECT_EQ(graph_context(4097), 8192);
  // Every context maps to a bound that holds it, and neighbours in one bound share a key.
  for (int32_t c : {1, 255, 256, 257, 511, 512, 513, 30000}) EXPECT_GE(graph_context(c), c) << c;
  EXPECT_EQ(graph_key(decode(2, 300)), graph_key(decode(2, 512)));
  EXPECT_NE(graph_key(decode(2, 512)), graph_key(decode(2, 513)));
  EXPECT_NE(graph_key(decode(2, 300)), graph_key(decode(3, 300)));
  EXPECT_FALSE(graph_key(decode(1, std::numeric_limits<int32_t>::max())));
}

TEST(GraphBook, WarmsUpThenRecordsThenReplays) {
  GraphBook book;
  const GraphKey a{1, 256}, b{4, 256};
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Eager) << "first sight: warm-up";
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Capture);
  book.recorded(a);
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Replay);
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Replay);
  EXPECT_EQ(book.next(b, 0).action, GraphAction::Eager) << "another batch size has its own";
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Replay);
}

TEST(GraphBook, AFreeDropsEveryGraphAndWarmsUpAgain) {
  GraphBook book;
  const GraphKey a{1, 256}, b{2, 256};
  book.next(a, 5);
  book.next(a, 5);
  book.recorded(a);
  book.next(b, 5);
  book.next(b, 5);
  book.recorded(b);
  const GraphDecision d = book.next(a, 6);  // something was freed since
  EXPECT_TRUE(d.drop_all);
  EXPECT_EQ(d.action, GraphAction::Eager);
  const GraphDecision e = book.next(b, 6);
  EXPECT_FALSE(e.drop_all) << "dropped once";
  EXPECT_EQ(e.action, GraphAction::Eager) << "b's warm-up before the free no longer counts";
  EXPECT_EQ(book.next(b, 6).action, GraphAction::Capture);
  EXPECT_EQ(book.next(a, 6).action, GraphAction::Capture);
  // A capture that did not happen (the backend ran the step eagerly) is tried again.
  EXPECT_EQ(book.next(a, 6).action, GraphAction::Capture);
}

TEST(GraphBook, ARefusedShapeStaysEager) {
  GraphBook book;
  const GraphKey a{1, 256};
  book.next(a, 0);
  ASSERT_EQ(book.next(a, 0).action, GraphAction::Capture);
  book.refused(a);
  EXPECT_EQ(book.next(a, 0).action, GraphAction::Eager);
  EXPECT_EQ(book.next(a, 1).action, GraphAction::Eager) << "even after a free";
}

TEST(GraphBook, HoldsAtMostMaxGraphs) {
  GraphBook book;
  for (int64_t t = 1; t <= int64_t(kMaxGraphs); ++t) {
    const GraphKey k{t % kGraphMaxTokens + 1, int32_t(256 << (t / kGraphMaxTokens))};
    book.next(k, 0);
    ASSERT_EQ(book.next(k, 0).action, GraphAction::Capture) << t;
    book.recorded(k);
  }
  const GraphKey extra{1, 1 << 20};
  book.next(extra, 0);
  EXPECT_EQ(book.next(extra, 0).action, GraphAction::Eager);
}

}  // namespace
}  // namespace qmpi::cuda
