// BlockPool over a BlockManager: a published block outlives its sequence as a cache entry and is
// found again by its tokens; when the pool goes, its unused cached blocks go back to the
// BlockManager (a second scheduler over the same cache, as qmpi bench makes, finds them free).
#include <gtest/gtest.h>

#include <vector>

#include "engine/block_pool.h"

namespace qmpi {
namespace {

TEST(BlockPool, CachedBlocksGoBackToTheManagerWithThePool) {
  BlockManager blocks(8, 4);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  {
    BlockPool pool(blocks, /*prefix_caching=*/true);
    std::vector<int32_t> table;
    ASSERT_TRUE(pool.ensure(table, 8));
    const uint64_t h0 = BlockPool::chain_hash(0, {tokens.data(), 4});
    pool.publish(table[0], h0, {tokens.data(), 4});
    pool.publish(table[1], BlockPool::chain_hash(h0, {tokens.data() + 4, 4}),
                 {tokens.data() + 4, 4});
    pool.release(table);
    EXPECT_EQ(pool.cached(), 2);
    EXPECT_EQ(blocks.free_blocks(), 6) << "cached blocks stay taken from the manager";

    std::vector<int32_t> again;
    std::vector<uint64_t> hashes;
    EXPECT_EQ(pool.match_prefix(tokens, 2, again, hashes), 2);
    pool.release(again);
  }
  EXPECT_EQ(blocks.free_blocks(), 8);
}

}  // namespace
}  // namespace qmpi
