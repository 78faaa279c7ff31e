#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/kv_decode.h"
#include "kernels/cpu/kv_store.h"
#include "kernels/cpu/reference_ops.h"

namespace qmpi {
namespace {

using test::max_rel_err;

constexpr DType kKvTypes[] = {DType::F32, DType::BF16, DType::F8_E4M3};

// A paged KV pool of any KV dtype whose sequences own shuffled, non-contiguous blocks.
struct Pool {
  int32_t block_size, kv_heads, head_dim;
  int64_t num_blocks;
  DType dtype;
  // The pools' bytes: elements, then fp8's per-vector scales.
  std::vector<uint8_t> k, v;
  std::vector<int32_t> free_blocks;
  float v_max = 0.0f;  // the largest |value| stored
  // Added to element 0 of token t's keys when set (scores shaped along the context).
  std::function<float(int32_t)> key_lift;

  Pool(int64_t blocks, int32_t bs, int32_t kvh, int32_t d, std::mt19937& rng, DType dt = DType::F32)
      : block_size(bs),
        kv_heads(kvh),
        head_dim(d),
        num_blocks(blocks),
        dtype(dt),
        k(scales_at() + (dt == DType::F8_E4M3 ? size_t(blocks * bs * kvh) * 4 : 0), 0xff),
        v(k.size(), 0xff),
        free_blocks(size_t(blocks)) {
    // All-ones bytes (NaN in f32, bf16, e4m3 and the scales) everywhere no sequence wrote:
    // reading an unowned slot poisons the output.
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  }
  size_t scales_at() const {
    return (size_t(num_blocks * block_size * kv_heads * head_dim) * dtype_size(dtype) + 3) / 4 * 4;
  }
  KvLayerView view() {
    KvLayerView view{k.data(), v.data(), num_blocks, block_size, kv_heads, head_dim, dtype};
    if (dtype == DType::F8_E4M3) {
      view.k_scale = reinterpret_cast<float*>(k.data() + scales_at());
      view.v_scale = reinterpret_cast<float*>(v.data() + scales_at());
    }
    return view;
  }

  // Appends a block table for `ctx` tokens to `tables` and fills those tokens with random K/V.
  void add_sequence(int32_t ctx, std::vector<int32_t>& tables, std::mt19937& rng) {
    const int32_t blocks = (ctx + block_size - 1) / block_size;
    std::vector<int32_t> slots;
    for (int32_t b = 0; b < blocks; ++b) {
      tables.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    const int32_t* table = tables.data() + tables.size() - blocks;
    for (int32_t t = 0; t < ctx; ++t)
      slots.push_back(table[t / block_size] * block_size + t % block_size);
    std::vector<float> nk = test::random_floats(size_t(ctx) * kv_heads * head_dim, rng);
    if (key_lift)
      for (int32_t t = 0; t < ctx; ++t)
        for (int32_t h = 0; h < kv_heads; ++h)
          nk[(size_t(t) * kv_heads + h) * head_dim] += key_lift(t);
    std::vector<float> nv = test::random_floats(nk.size(), rng);
    for (float x : nv) v_max = std::max(v_max, std::fabs(x));
    cpu::kv_store(nk.data(), nv.data(), ctx, slots.data(), view());
  }
};

struct SeqSpec {
  int32_t ctx_len, q_len;
};

struct Batch {
  std::vector<AttentionSeq> seqs;
  std::vector<int32_t> tables;
  int32_t rows = 0;
  AttentionBatch view(int32_t heads, const Pool& p) const {
    return {seqs.data(),
            int32_t(seqs.size()),
            tables.data(),
            heads,
            p.kv_heads,
            p.head_dim,
            1.0f / std::sqrt(float(p.head_dim))};
  }
};

Batch make_batch(const std::vector<SeqSpec>& specs, Pool& pool, std::mt19937& rng) {
  Batch b;
  for (const SeqSpec& s : specs) {
    b.seqs.push_back({b.rows, s.q_len, s.ctx_len, int32_t(b.tables.size())});
    b.rows += s.q_len;
    pool.add_sequence(s.ctx_len, b.tables, rng);
  }
  return b;
}

TEST(Attention, MatchesReferenceForMixedBatches) {
  std::mt19937 rng(21);
  // Decode (q_len 1), whole-prompt prefill (q_len = ctx) and prefill on top of a past.
  const std::vector<SeqSpec> specs{{1, 1},  {15, 15}, {16, 1},   {17, 17},
                                   {17, 5}, {100, 1}, {100, 37}, {16, 16}};
  for (int32_t bs : {16, 4})
    // 40 query heads on one KV head: more than one block of query vectors per token.
    for (auto [heads, kvh] : {std::pair<int32_t, int32_t>{2, 2}, {4, 2}, {14, 2}, {7, 1}, {40, 1}})
      for (int32_t d : {64, 24, 128})
        for (DType dt : kKvTypes) {
          Pool pool(200, bs, kvh, d, rng, dt);
          Batch b = make_batch(specs, pool, rng);
          std::vector<float> q = test::random_floats(size_t(b.rows) * heads * d, rng, 2.0f);
          std::vector<float> want(q.size()), got(q.size(), std::nanf(""));
          const AttentionBatch ab = b.view(heads, pool);
          cpu::ref::attention(q.data(), ab, pool.view(), want.data());
          for (int threads : {1, 2}) {
            cpu::attention(q.data(), ab, pool.view(), got.data(), threads);
            EXPECT_LT(max_rel_err(got, want), 1e-5) << "block " << bs << " heads " << heads << "/"
                                                    << kvh << " d " << d << " " << dtype_name(dt);
          }
        }
}

// An uneven TP rank: 11 query heads over 3 KV heads in groups of 2, 8 and 1 (Qwen2.5-72B's
// rank 2 of TP 6), and 3 heads over 2 KV heads in groups of 2 and 1.
TEST(Attention, HeadMapWithUnequalGroupsMatchesReference) {
  std::mt19937 rng(22);
  const std::vector<SeqSpec> specs{{1, 1}, {17, 17}, {40, 3}, {9, 1}};
  const std::vector<std::vector<int32_t>> maps{{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2}, {0, 0, 1}};
  for (const auto& map : maps)
    for (DType dt : kKvTypes) {
      const int32_t heads = int32_t(map.size()), kvh = map.back() + 1, d = 16;
      Pool pool(64, 4, kvh, d, rng, dt);
      Batch b = make_batch(specs, pool, rng);
      std::vector<float> q = test::random_floats(size_t(b.rows) * heads * d, rng, 2.0f);
      std::vector<float> want(q.size()), got(q.size(), std::nanf(""));
      AttentionBatch ab = b.view(heads, pool);
      ab.kv_head_of = map.data();
      cpu::ref::attention(q.data(), ab, pool.view(), want.data());
      for (int threads : {1, 2}) {
        cpu::attention(q.data(), ab, pool.view(), got.data(), threads);
        EXPECT_LT(max_rel_err(got, want), 1e-5) << heads << " heads, threads " << threads;
      }
      // Without the map the even rule h / (heads / kv_heads) applies, which these shapes break.
      ab.kv_head_of = nullptr;
      EXPECT_THROW(cpu::attention(q.data(), ab, pool.view(), got.data(), 1), Error);
    }
}

// Decode of one or two long sequences: the keys are split into chunks over the threads
// (flash-decoding) and the chunks' softmaxes combined; a prefill of 60 tokens after 640 cached
// ones runs tile by tile. Every thread count must give the reference's answer.
TEST(Attention, LongContextsSplitOverThreadsMatchReference) {
  std::mt19937 rng(24);
  const std::vector<std::vector<SeqSpec>> batches{
      {{3001, 1}}, {{2048, 1}, {517, 1}}, {{700, 60}}, {{4099, 1}, {1, 1}}};
  for (const auto& specs : batches)
    for (DType dt : kKvTypes) {
      const int32_t heads = 14, kvh = 2, d = 64;
      Pool pool(560, 16, kvh, d, rng, dt);
      Batch b = make_batch(specs, pool, rng);
      std::vector<float> q = test::random_floats(size_t(b.rows) * heads * d, rng, 3.0f);
      std::vector<float> want(q.size()), got(q.size(), std::nanf(""));
      const AttentionBatch ab = b.view(heads, pool);
      cpu::ref::attention(q.data(), ab, pool.view(), want.data());
      for (int threads : {1, 2, 3, 8}) {
        cpu::attention(q.data(), ab, pool.view(), got.data(), threads);
        EXPECT_LT(max_rel_err(got, want), 1e-5)
            << specs[0].ctx_len << " keys, " << threads << " threads, " << dtype_name(dt);
      }
    }
}

// The bf16 decode path (--dtype auto) on bf16 and fp8 caches against the float64 reference fed
// the same bf16-rounded (scaled) queries: the only other rounding is that of the softmax weights
// to bf16 (2^-9 relative), so each output is within 2^-9 of the largest |value| (bound 2^-8).
// Decode rows of short and long contexts split into chunks over 1-8 threads (tile and chunk
// boundaries at 31-33 and 4096 keys), groups larger than a block (40 heads on one KV head),
// unequal groups of an uneven TP rank; prefill rows in the same batch and head dims that are
// not a multiple of 32 keep the exact path (within the exact bound of the unrounded queries).
TEST(Attention, Bf16DecodeWithinBoundOfRoundedQueries) {
  std::mt19937 rng(26);
  struct Shape {
    int32_t heads, kvh, d;
    std::vector<int32_t> map;  // empty: the even split
  };
  const std::vector<Shape> shapes{{14, 2, 64, {}},
                                  {7, 1, 128, {}},
                                  {40, 1, 32, {}},
                                  {4, 2, 24, {}},
                                  {11, 3, 64, {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2}}};
  const std::vector<std::vector<SeqSpec>> batches{
      {{1, 1}, {31, 1}, {32, 1}, {33, 1}}, {{4099, 1}}, {{2048, 1}, {300, 20}, {517, 1}}};
  for (const Shape& sh : shapes)
    for (DType dt : {DType::BF16, DType::F8_E4M3})
      for (const auto& specs : batches) {
        Pool pool(900, 16, sh.kvh, sh.d, rng, dt);
        Batch b = make_batch(specs, pool, rng);
        std::vector<float> q = test::random_floats(size_t(b.rows) * sh.heads * sh.d, rng, 3.0f);
        AttentionBatch ab = b.view(sh.heads, pool);
        if (!sh.map.empty()) ab.kv_head_of = sh.map.data();
        // What the kernel multiplies: bf16(q * scale), handed to the reference unscaled.
        std::vector<float> qr(q.size());
        for (size_t i = 0; i < q.size(); ++i)
          qr[i] = bf16_to_f32(f32_to_bf16(q[i] * ab.scale)) / ab.scale;
        std::vector<float> want(q.size()), exact(q.size()), got(q.size(), std::nanf(""));
        cpu::ref::attention(qr.data(), ab, pool.view(), want.data());
        cpu::ref::attention(q.data(), ab, pool.view(), exact.data());
        double exact_max = 0;
        for (float x : exact) exact_max = std::max(exact_max, std::fabs(double(x)));
        // Without bf16 dot products the decode rows take the exact path too.
        const bool bf16_rows = cpu::kHaveBf16Dot && sh.d % 32 == 0;
        for (int threads : {1, 2, 3, 8}) {
          cpu::attention(q.data(), ab, pool.view(), got.data(), threads, true);
          for (const AttentionSeq& seq : b.seqs)
            for (int64_t e = int64_t(seq.q_begin) * sh.heads * sh.d;
                 e < int64_t(seq.q_begin + seq.q_len) * sh.heads * sh.d; ++e) {
              if (seq.q_len == 1 && bf16_rows)
                ASSERT_LE(std::fabs(got[size_t(e)] - want[size_t(e)]), pool.v_max / 256)
                    << seq.ctx_len << " keys, " << sh.heads << "/" << sh.kvh << " heads, d " << sh.d
                    << ", " << dtype_name(dt) << ", " << threads << " threads";
              else
                ASSERT_LE(std::fabs(got[size_t(e)] - exact[size_t(e)]), 1e-5 * exact_max)
                    << seq.ctx_len << " keys, d " << sh.d << ", " << threads << " threads";
            }
        }
      }
}

// The decode paths move their running shift only when a score passes it by a slack: scores in
// a sawtooth (rising by 24 over every 300 keys, a few per tile, then falling back) make it move
// inside chunks and leave every chunk with a peak of the same height, so an output that missed a
// rescale on a move, or a merge that weighed chunks by the wrong shift, is off by far more than
// the bound. Odd contexts over 1-8 threads, even and unequal groups, bf16 and fp8.
TEST(Attention, Bf16DecodeFollowsScoresThatClimbPastTheShift) {
  std::mt19937 rng(31);
  struct Shape {
    int32_t heads, kvh;
    std::vector<int32_t> map;
  };
  const int32_t d = 64;
  for (const Shape& sh : {Shape{14, 2, {}}, Shape{11, 3, {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2}}})
    for (DType dt : {DType::BF16, DType::F8_E4M3}) {
      Pool pool(900, 16, sh.kvh, d, rng, dt);
      pool.key_lift = [](int32_t t) { return 24.0f * float(t % 300) / 300.0f; };
      Batch b = make_batch({{4099, 1}, {1001, 1}, {77, 1}}, pool, rng);
      // Element 0 of every query is sqrt(d): its score then carries the lift.
      std::vector<float> q = test::random_floats(size_t(b.rows) * sh.heads * d, rng, 0.5f);
      for (size_t i = 0; i < q.size(); i += d) q[i] = std::sqrt(float(d));
      AttentionBatch ab = b.view(sh.heads, pool);
      if (!sh.map.empty()) ab.kv_head_of = sh.map.data();
      std::vector<float> qr(q.size());
      for (size_t i = 0; i < q.size(); ++i)
        qr[i] = bf16_to_f32(f32_to_bf16(q[i] * ab.scale)) / ab.scale;
      std::vector<float> want(q.size()), exact(q.size()), got(q.size(), std::nanf(""));
      cpu::ref::attention(qr.data(), ab, pool.view(), want.data());
      cpu::ref::attention(q.data(), ab, pool.view(), exact.data());
      for (int threads : {1, 2, 3, 8}) {
        cpu::attention(q.data(), ab, pool.view(), got.data(), threads, true);
        for (size_t e = 0; e < got.size(); ++e)
          ASSERT_LE(std::fabs(got[e] - want[e]), pool.v_max / 256)
              << "element " << e << ", " << sh.heads << "/" << sh.kvh << " heads, "
              << dtype_name(dt) << ", " << threads << " threads";
        // The exact path's decode rows (attend_decode where the build has vector registers) move
        // their shift the same way, in float32.
        cpu::attention(q.data(), ab, pool.view(), got.data(), threads, false);
        EXPECT_LT(max_rel_err(got, exact), 1e-5)
            << sh.heads << "/" << sh.kvh << " heads, " << dtype_name(dt) << ", " << threads
            << " threads, exact path";
      }
    }
}

// fp8 codes widen to bf16 exactly, times 2^-8 (the decode paths read an fp8 cache this way):
// every finite e4m3 code, subnormals and both zeros included, in two rows of 200 (whole 64-code
// steps and a partial one) that together hold them all.
TEST(KvDecode, E4m3CodesWidenToBf16Exactly) {
  std::vector<uint8_t> codes(256);
  for (size_t c = 0; c < codes.size(); ++c) codes[c] = uint8_t((c & 0x7f) == 0x7f ? 0 : c);
  std::vector<uint16_t> buf(200);
  for (int64_t at : {0, 56}) {
    const uint16_t* got = cpu::kv_row_bf16(codes.data(), DType::F8_E4M3, at, 200, buf.data());
    for (int64_t c = 0; c < 200; ++c)
      EXPECT_EQ(got[c], f32_to_bf16(e4m3_to_f32(codes[size_t(at + c)]) * 0x1p-8f))
          << "code " << int(codes[size_t(at + c)]);
  }
}

// What the cache holds: bf16 rounds each element to nearest even, fp8 keeps one scale per
// (token, KV head) with the vector's largest |x| mapped to 448, so an element's error is at most
// half an e4m3 step (2^-4 relative) of the vector's scale grid.
TEST(KvStore, Bf16AndFp8RoundAsDocumented) {
  std::mt19937 rng(25);
  const int32_t kvh = 2, d = 24;
  std::vector<float> k = test::random_floats(size_t(3 * kvh * d), rng, 5.0f), v = k;
  k[0] = 0.0f;
  const std::vector<int32_t> slots{7, 0, 5};
  for (DType dt : {DType::BF16, DType::F8_E4M3}) {
    Pool pool(2, 4, kvh, d, rng, dt);
    const KvLayerView view = pool.view();
    cpu::kv_store(k.data(), v.data(), 3, slots.data(), view);
    for (int32_t i = 0; i < 3; ++i)
      for (int32_t h = 0; h < kvh; ++h) {
        const int64_t vec = int64_t(slots[size_t(i)]) * kvh + h;
        const float* x = k.data() + (i * kvh + h) * d;
        float amax = 0.0f;
        for (int32_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(x[c]));
        for (int32_t c = 0; c < d; ++c) {
          if (dt == DType::BF16) {
            EXPECT_EQ(static_cast<const uint16_t*>(view.k)[vec * d + c], f32_to_bf16(x[c]));
          } else {
            EXPECT_EQ(view.k_scale[vec], amax / 448.0f);
            const float got =
                e4m3_to_f32(static_cast<const uint8_t*>(view.k)[vec * d + c]) * view.k_scale[vec];
            EXPECT_LE(std::fabs(got - x[c]), std::max(std::fabs(x[c]) / 16, amax / 448 / 512))
                << x[c];
          }
        }
      }
  }
}

TEST(Attention, HeadMapOutOfOrderIsAnInternalError) {
  std::mt19937 rng(23);
  Pool pool(8, 4, 2, 8, rng);
  Batch b = make_batch({{3, 3}}, pool, rng);
  std::vector<float> q(size_t(3) * 3 * 8, 1.0f), out(q.size());
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{1, 0, 1},  // not in order
                                          std::vector<int32_t>{0, 0, 0},  // KV head 1 unread
                                          std::vector<int32_t>{0, 2, 1}}) {
    AttentionBatch ab = b.view(3, pool);
    ab.kv_head_of = bad.data();
    try {
      cpu::attention(q.data(), ab, pool.view(), out.data(), 1);
      ADD_FAILURE() << "map accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::Internal);
    }
  }
}

TEST(Attention, QueryHeadReadsKvHeadOfItsGroup) {
  // Every key equal (uniform softmax) and KV head g's values all g + 1: query head j must
  // come out as j / (heads / kv_heads) + 1 everywhere.
  const int32_t heads = 6, kvh = 3, d = 8, bs = 4, ctx = 9;
  std::vector<float> k(size_t(4 * bs * kvh * d), 0.5f), v(k.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i / d % kvh + 1);
  const KvLayerView kv{k.data(), v.data(), 4, bs, kvh, d};
  const std::vector<int32_t> table{2, 0, 3};
  const AttentionSeq seq{0, 2, ctx, 0};
  const AttentionBatch b{&seq, 1, table.data(), heads, kvh, d, 0.3f};
  std::vector<float> q(size_t(2 * heads * d), 1.0f), out(q.size());
  cpu::attention(q.data(), b, kv, out.data(), 2);
  for (int32_t row = 0; row < 2; ++row)
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t c = 0; c < d; ++c)
        EXPECT_FLOAT_EQ(out[size_t((row * heads + h) * d + c)], float(h / (heads / kvh) + 1))
            << "head " << h;
}

TEST(Attention, PrefillEqualsTokenByTokenDecode) {
  std::mt19937 rng(22);
  const int32_t heads = 14, kvh = 2, d = 64, bs = 16, T = 40;
  Pool pool(8, bs, kvh, d, rng);
  Batch prefill = make_batch({{T, T}}, pool, rng);
  std::vector<float> q = test::random_floats(size_t(T) * heads * d, rng, 2.0f);
  std::vector<float> all(q.size()), one(size_t(heads) * d);
  cpu::attention(q.data(), prefill.view(heads, pool), pool.view(), all.data(), 2);
  for (int32_t t = 0; t < T; ++t) {
    const AttentionSeq step{0, 1, t + 1, 0};
    AttentionBatch b = prefill.view(heads, pool);
    b.seqs = &step;
    cpu::attention(q.data() + size_t(t) * heads * d, b, pool.view(), one.data(), 2);
    const float* row = all.data() + size_t(t) * heads * d;
    // The same float32 products summed in other orders: a prefill block of 4 tokens' 28 query
    // vectors and a decode block of 7 split their score sums differently (AVX-512's blocks of 8
    // measured 1.08e-6 here), the bound the reference comparisons above use; a masking error
    // would show at 1e-2.
    EXPECT_LT(max_rel_err(one.data(), row, one.size()), 1e-5) << "token " << t;
  }
}

TEST(Attention, RejectsBlocksOutsideThePool) {
  std::mt19937 rng(23);
  Pool pool(2, 4, 1, 8, rng);
  const std::vector<int32_t> table{1, 2};
  const AttentionSeq seq{0, 1, 6, 0};
  const AttentionBatch b{&seq, 1, table.data(), 1, 1, 8, 1.0f};
  std::vector<float> q(8, 1.0f), out(8);
  try {
    cpu::attention(q.data(), b, pool.view(), out.data(), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Internal);
    EXPECT_NE(e.message().find("block 2"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace qmpi
