// Grid and block sizes of the CUDA kernels (kernels/cuda/launch_shapes.h), checked on the host.
#include "kernels/cuda/launch_shapes.h"

#include <gtest/gtest.h>

namespace qmpi::cuda {
namespace {

int64_t threads_of(const LaunchShape& s) {
  return int64_t(s.grid_x) * s.grid_y * s.block;
}

TEST(LaunchShapes, ElementwiseCoversEveryElementOrStridesOverThem) {
  EXPECT_TRUE(elementwise_shape(0).empty());
  EXPECT_TRUE(elementwise_shape(-3).empty());
  for (int64_t count : {1LL, 255LL, 256LL, 257LL, 896LL * 7, 1LL << 24}) {
    const LaunchShape s = elementwise_shape(count);
    SCOPED_TRACE(count);
    EXPECT_EQ(s.block, kElementwiseThreads);
    EXPECT_GE(threads_of(s), count);                     // one thread per element...
    EXPECT_LT(threads_of(s) - count, int64_t(s.block));  // ...and less than a block to spare
  }
  // Past the cap the grid stays at the cap and the kernels loop (grid-stride).
  const LaunchShape big = elementwise_shape(int64_t(1) << 34);
  EXPECT_EQ(big.grid_x, uint32_t(kMaxElementwiseBlocks));
  EXPECT_LT(threads_of(big), int64_t(1) << 34);
}

TEST(LaunchShapes, RowShapeIsWholeWarpsAndOneBlockPerRow) {
  EXPECT_TRUE(row_shape(0, 896).empty());
  EXPECT_TRUE(row_shape(4, 0).empty());
  EXPECT_EQ(row_shape(3, 1).block, kWarp);
  EXPECT_EQ(row_shape(3, 896).block, 224u);  // 896 / 4 elements per thread
  EXPECT_EQ(row_shape(3, 100).block, 32u);   // 25 threads round up to one warp
  EXPECT_EQ(row_shape(3, 130).block, 64u);   // 33 threads round up to two warps
  EXPECT_EQ(row_shape(3, 8192).block, kMaxBlock);
  EXPECT_EQ(row_shape(3, 1 << 20).block, kMaxBlock);  // wide rows loop inside the block
  for (int64_t width : {1, 31, 896, 3584, 8192, 29568}) {
    const LaunchShape s = row_shape(17, width);
    EXPECT_EQ(s.grid_x, 17u);
    EXPECT_EQ(s.block % kWarp, 0u) << width;
    EXPECT_LE(s.block, kMaxBlock) << width;
  }
  EXPECT_TRUE(row_shape(kMaxGridX + 1, 8).empty());
}

TEST(LaunchShapes, RopeHasOneThreadPerTokenAndPair) {
  const LaunchShape s = rope_shape(5, 64);
  EXPECT_GE(threads_of(s), 5 * 32);
  EXPECT_TRUE(rope_shape(5, 63).empty());  // rotate-half needs an even head_dim
  EXPECT_TRUE(rope_shape(5, 0).empty());
  EXPECT_TRUE(rope_shape(0, 64).empty());
}

TEST(LaunchShapes, KvStoreIsOneWarpPerNewVector) {
  const LaunchShape s = kv_store_shape(3, 2, 64);
  EXPECT_GE(threads_of(s), 3 * 2 * int64_t(kWarp));
  EXPECT_TRUE(kv_store_shape(3, 2, 0).empty());
  EXPECT_TRUE(kv_store_shape(0, 2, 64).empty());
}

TEST(LaunchShapes, AttentionIsOneBlockPerRowAndHead) {
  const LaunchShape s = attention_shape(37, 14, 64);
  EXPECT_EQ(s.grid_x, 37u);
  EXPECT_EQ(s.grid_y, 14u);
  EXPECT_EQ(s.block, kAttentionThreads);
  EXPECT_EQ(kAttentionThreads % kWarp, 0u);
  EXPECT_EQ(kAttentionMaxHeadDim % int32_t(kWarp), 0);
  EXPECT_FALSE(attention_shape(1, 1, kAttentionMaxHeadDim).empty());
  EXPECT_TRUE(attention_shape(1, 1, kAttentionMaxHeadDim + 1).empty());
  EXPECT_TRUE(attention_shape(1, int32_t(kMaxGridY) + 1, 64).empty());
  EXPECT_TRUE(attention_shape(0, 14, 64).empty());
  // A split launches one block per (row, chunk) along x.
  const LaunchShape split = attention_shape(3, 14, 64, 16);
  EXPECT_EQ(split.grid_x, 48u);
  EXPECT_EQ(split.grid_y, 14u);
  EXPECT_TRUE(attention_shape(3, 14, 64, 0).empty());
  EXPECT_TRUE(attention_shape(kMaxGridX / 2 + 1, 1, 64, 2).empty());
}

TEST(LaunchShapes, FlashDecodingSplitsOnlyFewRowsWithLongContexts) {
  const int32_t sms = 132;  // an H100 / H200
  // One decode row of a 14-head model at context 4096: 14 blocks for 132 SMs, so the keys
  // split into 16 chunks of 256 (capped by the minimum chunk, not by the blocks wanted).
  const AttentionSplit one = attention_split(1, 14, 4096, sms);
  EXPECT_EQ(one.chunks, 16);
  EXPECT_EQ(one.chunk_keys, 256);
  // At context 100k the blocks wanted cap it: ceil(528 / 14) = 38 chunks at most.
  const AttentionSplit longer = attention_split(1, 14, 100000, sms);
  EXPECT_LE(longer.chunks, 38);
  EXPECT_GE(longer.chunks, 30);
  // Short contexts, and batches that already fill the GPU, stay single-pass.
  EXPECT_EQ(attention_split(1, 14, 2 * kSplitMinChunkKeys - 1, sms).chunks, 1);
  EXPECT_EQ(attention_split(38, 14, 4096, sms).chunks, 1);  // 532 blocks >= 4 per SM
  EXPECT_GT(attention_split(37, 14, 4096, sms).chunks, 1);  // 518 blocks
  EXPECT_EQ(attention_split(0, 14, 4096, sms).chunks, 1);
  // A single pass covers the longest context in its one chunk.
  EXPECT_GE(attention_split(64, 14, 3000, sms).chunk_keys, 3000);
  EXPECT_GE(attention_split(1, 14, 0, sms).chunk_keys, 1);
}

TEST(LaunchShapes, FlashDecodingChunksCoverTheContextAndFitTheWorkspace) {
  for (int32_t sms : {1, 16, 108, 132})
    for (int64_t rows : {1, 2, 5, 40})
      for (int32_t heads : {1, 2, 14, 28})
        for (int32_t keys : {1, 511, 512, 513, 1000, 4096, 4097, 32768, 131072}) {
          const AttentionSplit a = attention_split(rows, heads, keys, sms);
          SCOPED_TRACE(testing::Message() << sms << " SMs, " << rows << " rows, " << heads
                                          << " heads, " << keys << " keys");
          ASSERT_GE(a.chunks, 1);
          ASSERT_LE(a.chunks, kSplitMaxChunks);
          EXPECT_GE(int64_t(a.chunks) * a.chunk_keys, keys);  // every key in a chunk
          if (a.chunks == 1) continue;
          EXPECT_LT(int64_t(a.chunks - 1) * a.chunk_keys, keys);  // the longest row: no empty chunk
          EXPECT_GE(a.chunk_keys, kSplitMinChunkKeys);
          EXPECT_EQ(a.chunk_keys % 64, 0);
          EXPECT_LE(rows * heads * a.chunks, attention_split_max_partials(sms));
          EXPECT_FALSE(attention_shape(rows, heads, 128, a.chunks).empty());
        }
  // The workspace for the largest split stays a small part of the planner's 1 GiB overhead.
  EXPECT_LT(attention_split_workspace_bytes(132), 2 << 20);
}

}  // namespace
}  // namespace qmpi::cuda
