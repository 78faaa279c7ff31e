#include "io/h5_layout.h"

#include <gtest/gtest.h>

namespace qmpi {
namespace {

TEST(TpSplit, FollowsTheShardPlan) {
  const int64_t hd = 64;
  EXPECT_EQ(tp_split("model.layers.3.self_attn.q_proj.weight", hd).dim, 0);
  EXPECT_EQ(tp_split("model.layers.3.self_attn.q_proj.weight", hd).unit, hd);
  EXPECT_EQ(tp_split("model.layers.3.self_attn.k_proj.bias", hd).dim, 0);
  EXPECT_EQ(tp_split("model.layers.3.self_attn.v_proj.weight", hd).unit, hd);
  EXPECT_EQ(tp_split("model.layers.3.self_attn.o_proj.weight", hd).dim, 1);
  EXPECT_EQ(tp_split("model.layers.3.self_attn.o_proj.weight", hd).unit, hd);
  EXPECT_EQ(tp_split("model.layers.3.mlp.gate_proj.weight", hd).dim, 0);
  EXPECT_EQ(tp_split("model.layers.3.mlp.up_proj.weight", hd).dim, 0);
  EXPECT_EQ(tp_split("model.layers.3.mlp.down_proj.weight", hd).dim, 1);
  EXPECT_EQ(tp_split("model.layers.3.mlp.down_proj.weight", hd).unit, 1);
  EXPECT_EQ(tp_split("model.embed_tokens.weight", hd).dim, 0);
  EXPECT_EQ(tp_split("lm_head.weight", hd).dim, 0);
  EXPECT_EQ(tp_split("model.layers.3.input_layernorm.weight", hd).dim, -1);
  EXPECT_EQ(tp_split("model.norm.weight", hd).dim, -1);
}

TEST(ChunkShape, Qwen25HalfBillion) {  // bf16, hidden 896, 14 heads of 64, 2 KV heads
  const int64_t hd = 64;
  auto chunk = [&](const char* name, std::vector<int64_t> shape) {
    return chunk_shape(shape, tp_split(name, hd), 2);
  };
  // 14 heads: gcd(14, 24) = 2 chunks of 7 heads
  EXPECT_EQ(chunk("model.layers.0.self_attn.q_proj.weight", {896, 896}),
            (std::vector<int64_t>{448, 896}));
  EXPECT_EQ(chunk("model.layers.0.self_attn.q_proj.bias", {896}), (std::vector<int64_t>{448}));
  EXPECT_EQ(chunk("model.layers.0.self_attn.k_proj.weight", {128, 896}),
            (std::vector<int64_t>{64, 896}));
  EXPECT_EQ(chunk("model.layers.0.self_attn.o_proj.weight", {896, 896}),
            (std::vector<int64_t>{896, 448}));
  // 4864 = 2^8 * 19: 8 chunks of 608
  EXPECT_EQ(chunk("model.layers.0.mlp.up_proj.weight", {4864, 896}),
            (std::vector<int64_t>{608, 896}));
  EXPECT_EQ(chunk("model.layers.0.mlp.down_proj.weight", {896, 4864}),
            (std::vector<int64_t>{896, 608}));
  // 151936 = 2^7 * 1187: 8 chunks of 18992 rows (34 MB each)
  EXPECT_EQ(chunk("model.embed_tokens.weight", {151936, 896}), (std::vector<int64_t>{18992, 896}));
  EXPECT_EQ(chunk("model.norm.weight", {896}), (std::vector<int64_t>{896}));
}

TEST(ChunkShape, LargeTensorsStayUnder64MiB) {
  // Qwen2.5-72B: 152064 = 2^9 * 3^3 * 11: 24 chunks would be 104 MB, so 48 of 52 MB
  const auto embed = chunk_shape({152064, 8192}, {0, 1}, 2);
  EXPECT_EQ(embed, (std::vector<int64_t>{3168, 8192}));
  EXPECT_LE(uint64_t(embed[0] * embed[1] * 2), kMaxChunkBytes);
  // 64 heads of 128: gcd(64, 24) = 8 chunks of 8 heads (16 MiB)
  EXPECT_EQ(chunk_shape({8192, 8192}, {1, 128}, 2), (std::vector<int64_t>{8192, 1024}));
  // An unsplit tensor over the cap is cut along its rows.
  const auto big = chunk_shape({100000, 1024}, {}, 4);
  EXPECT_LT(big[0], 100000);
  EXPECT_EQ(100000 % big[0], 0);
  EXPECT_LE(uint64_t(big[0]) * 1024 * 4, kMaxChunkBytes);
}

TEST(ChunkShape, EveryDividingTpSizeGetsWholeChunks) {
  for (int64_t heads : {12, 14, 16, 28, 40, 64}) {
    const int64_t hd = 128;
    const auto c = chunk_shape({heads * hd, 512}, {0, hd}, 2);
    for (int64_t tp : {1, 2, 3, 4, 6, 8}) {
      if (heads % tp != 0) continue;
      const int64_t rows_per_rank = heads / tp * hd;
      EXPECT_EQ(rows_per_rank % c[0], 0) << heads << " heads, tp " << tp;
    }
  }
}

TEST(ChunkShape, ScalarsAndEmptyTensorsAreContiguous) {
  EXPECT_TRUE(chunk_shape({}, {}, 4).empty());
  EXPECT_TRUE(chunk_shape({0, 8}, {0, 1}, 4).empty());
  EXPECT_EQ(chunk_shape({7}, {0, 4}, 4), (std::vector<int64_t>{7}));  // 7 % 4: unit falls back
}

}  // namespace
}  // namespace qmpi
