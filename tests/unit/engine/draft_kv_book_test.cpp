// A draft model's per-sequence KV bookkeeping (engine/draft_kv_book.h): a proposal keeps the
// common prefix of what the draft fed and the sequence's tokens now, so rejected guesses fall
// off and their blocks return; the last token is always fed again; the cache never grows past
// its blocks (the least recently used sequences make room, one too long for the whole cache
// gets nothing) and a finished sequence's blocks come back.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/draft_kv_book.h"

namespace qmpi {
namespace {

std::vector<int32_t> seq(int32_t from, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// What DraftModelProposer::propose does with the book for `guesses` guesses after `ctx`,
// minus the model: returns the tokens kept from before.
int64_t propose(DraftKvBook& b, int64_t id, const std::vector<int32_t>& ctx,
                const std::vector<int32_t>& guesses) {
  const int64_t kept = b.keep_prefix(id, ctx);
  if (!b.reserve(id, int64_t(ctx.size() + guesses.size()) - 1)) return -1;
  b.fed(id, std::span(ctx).subspan(size_t(kept)));
  b.fed(id, std::span(guesses).first(guesses.size() - 1));  // the last guess is never fed
  return kept;
}

TEST(DraftKvBook, RejectedGuessesFallOffThePrefix) {
  DraftKvBook b(16, 4);
  std::vector<int32_t> ctx = seq(100, 10);
  EXPECT_EQ(propose(b, 1, ctx, {7, 8, 9, 10}), 0);  // first time: the whole context
  EXPECT_EQ(b.fed_count(1), 13);                    // 10 + 3 guesses
  EXPECT_EQ(b.table(1).size(), 4u);                 // 13 positions in blocks of 4
  // The target kept guess 7, rejected 8 and sampled 5 instead: 11 fed tokens still match.
  ctx.insert(ctx.end(), {7, 5});
  EXPECT_EQ(b.keep_prefix(1, ctx), 11);
  EXPECT_EQ(b.fed_count(1), 11);
  EXPECT_EQ(b.table(1).size(), 3u);  // the block of positions 12.. went back
  EXPECT_EQ(b.free_blocks(), 13);
  // Every guess accepted plus the target's own token: all fed tokens match, yet the context's
  // last token is fed again (its logits give the next first guess).
  ASSERT_TRUE(b.reserve(1, 16));
  b.fed(1, std::vector<int32_t>{5, 20, 21, 22});  // now 15 tokens: ctx (12) + 20, 21, 22
  std::vector<int32_t> all = ctx;
  all.insert(all.end(), {20, 21, 22});
  EXPECT_EQ(b.keep_prefix(1, all), 14);  // 15 match, at most size - 1 = 14 are kept
  // Something else changed early on (a rewritten history): only the common prefix stays.
  all[3] = -1;
  EXPECT_EQ(b.keep_prefix(1, all), 3);
  EXPECT_EQ(b.table(1).size(), 1u);
}

TEST(DraftKvBook, LeastRecentlyUsedMakesRoomAndTheCacheNeverGrows) {
  DraftKvBook b(6, 4);                             // 24 positions
  EXPECT_EQ(propose(b, 1, seq(0, 8), {1, 2}), 0);  // 9 positions: 3 blocks
  EXPECT_EQ(propose(b, 2, seq(0, 6), {1, 2}), 0);  // 7: 2 blocks
  EXPECT_EQ(b.free_blocks(), 1);
  // Sequence 1 proposes again (it is now the most recent), then 3 needs 3 blocks: 2 goes.
  EXPECT_EQ(b.keep_prefix(1, seq(0, 9)), 8);
  EXPECT_EQ(propose(b, 3, seq(50, 10), {1}), 0);
  EXPECT_EQ(b.fed_count(2), 0);
  EXPECT_EQ(b.fed_count(1), 8);
  EXPECT_EQ(b.sequences(), 2u);
  EXPECT_LE(b.free_blocks(), b.num_blocks());
  // 2 comes back: it prefills from scratch.
  EXPECT_EQ(propose(b, 2, seq(0, 6), {1, 2}), 0);
  // One sequence longer than the whole cache gets nothing and keeps no state; the others stay.
  const int64_t before = b.free_blocks();
  EXPECT_EQ(propose(b, 4, seq(0, 30), {1}), -1);
  EXPECT_EQ(b.fed_count(4), 0);
  EXPECT_EQ(b.free_blocks(), before);
}

TEST(DraftKvBook, ForgetReturnsTheBlocks) {
  DraftKvBook b(8, 4);
  propose(b, 1, seq(0, 12), {1, 2, 3});
  propose(b, 2, seq(0, 5), {1});
  EXPECT_EQ(b.free_blocks(), 8 - 4 - 2);
  b.forget(1);
  b.forget(1);  // twice is fine
  b.forget(9);  // as is a sequence that never proposed
  EXPECT_EQ(b.free_blocks(), 6);
  b.forget(2);
  EXPECT_EQ(b.free_blocks(), 8);
  EXPECT_EQ(b.sequences(), 0u);
}

}  // namespace
}  // namespace qmpi
