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
}

}  // namespace
}  // namespace qmpi::cuda
