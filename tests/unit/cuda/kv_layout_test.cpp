// The KV cache layout the CUDA kernels index (kernels/cuda/kv_layout.h) is the CPU backend's:
// checked against the CPU kv_store and attention, which need no device.
#include "kernels/cuda/kv_layout.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_store.h"
#include "model/kv_cache.h"

namespace qmpi::cuda {
namespace {

struct HostCache {
  std::vector<float> k, v;
  KvLayerView view;
  HostCache(int64_t blocks, int32_t block_size, int32_t kv_heads, int32_t head_dim)
      : k(size_t(blocks * block_size * kv_heads * head_dim), 0.0f), v(k.size(), 0.0f) {
    view = {k.data(), v.data(), blocks, block_size, kv_heads, head_dim};
  }
};

TEST(KvLayout, OffsetsTileThePoolExactlyAsKvCacheSizesIt) {
  KvCacheShape shape;
  shape.num_layers = 1;
  shape.num_blocks = 5;
  shape.block_size = 16;
  shape.kv_heads = 2;
  shape.head_dim = 64;
  shape.dtype = DType::F32;
  const int64_t slots = shape.num_blocks * shape.block_size;
  // The last head of the last slot ends exactly where one pool (half a layer's bytes) ends.
  EXPECT_EQ(uint64_t(kv_offset(slots - 1, shape.kv_heads - 1, shape.kv_heads, shape.head_dim) +
                     shape.head_dim) *
                sizeof(float) * 2,
            shape.bytes());
  EXPECT_EQ(kv_offset(1, 0, 2, 64), kv_offset(0, 1, 2, 64) + 64);
}

TEST(KvLayout, CpuKvStoreWritesWhereKvOffsetPoints) {
  const int32_t H = 2, D = 8, bs = 4;
  HostCache cache(6, bs, H, D);
  const std::vector<int32_t> slots = {5, 0, 23, 13};
  std::vector<float> k(slots.size() * H * D), v(k.size());
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 1000.0f);
  cpu::kv_store(k.data(), v.data(), int64_t(slots.size()), slots.data(), cache.view);
  for (size_t i = 0; i < slots.size(); ++i)
    for (int32_t h = 0; h < H; ++h)
      for (int32_t d = 0; d < D; ++d) {
        const size_t src = (i * H + size_t(h)) * D + size_t(d);
        const size_t dst = size_t(kv_offset(slots[i], h, H, D) + d);
        ASSERT_EQ(cache.k[dst], k[src]) << "token " << i << " head " << h << " dim " << d;
        ASSERT_EQ(cache.v[dst], v[src]);
      }
}

// With all keys zero every score is equal, so the CPU attention returns the mean of the values
// the query sees. Computing that mean through kv_slot / the head map / query_position reproduces
// the CPU result only if both sides agree on the block table, GQA and causal mapping.
TEST(KvLayout, CpuAttentionReadsTheSlotsKvSlotNames) {
  const int32_t heads = 4, H = 2, D = 8, bs = 4, blocks = 8;
  HostCache cache(blocks, bs, H, D);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : cache.v) x = u(rng);

  const std::vector<int32_t> table = {6, 2, 7, 0};  // 13 keys over 4 blocks, out of order
  const AttentionSeq seq{0, 3, 13, 0};              // 3 new tokens at positions 10, 11, 12
  AttentionBatch b;
  b.seqs = &seq;
  b.num_seqs = 1;
  b.block_tables = table.data();
  b.num_heads = heads;
  b.num_kv_heads = H;
  b.head_dim = D;
  b.scale = 0.125f;
  // Three query heads on KV head 0 and one on KV head 1, as on an uneven TP rank.
  const std::vector<int32_t> head_map = {0, 0, 0, 1};
  b.kv_head_of = head_map.data();
  std::vector<float> q(size_t(seq.q_len) * heads * D, 0.5f), out(q.size(), -7.0f);
  cpu::attention(q.data(), b, cache.view, out.data(), 1);

  for (int32_t i = 0; i < seq.q_len; ++i) {
    const int32_t pos = query_position(seq.ctx_len, seq.q_len, i);
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t d = 0; d < D; ++d) {
        double mean = 0.0;
        for (int32_t p = 0; p <= pos; ++p)
          mean += cache.v[size_t(
              kv_offset(kv_slot(table.data(), p, bs), head_map[size_t(h)], H, D) + d)];
        mean /= pos + 1;
        EXPECT_NEAR(out[(size_t(i) * heads + size_t(h)) * D + size_t(d)], mean, 1e-5)
            << "row " << i << " head " << h << " dim " << d;
      }
  }
}

}  // namespace
}  // namespace qmpi::cuda
