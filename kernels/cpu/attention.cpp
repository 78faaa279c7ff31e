#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/kv_decode.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd_math.h"
#include "kernels/kv_dtype.h"

namespace qmpi::cpu {
namespace {

using attn::kTile;
// Query vectors (query heads x new tokens of one sequence, all reading one KV head) that share
// each converted key and value of a tile: 32 keeps a block's scores and outputs in L1.
constexpr int32_t kMaxVectors = 32;
// Fewest keys worth a work item of their own when a long context is split over threads.
constexpr int64_t kMinChunk = 256;
#if defined(QMPI_CPU_VEC)
constexpr bool kHaveVec = true;
constexpr int32_t kVecLanes = vec::kLanes;
#else
constexpr bool kHaveVec = false;
constexpr int32_t kVecLanes = 1;
#endif

void check(const AttentionBatch& b, const KvLayerView& kv) {
  if (!heads_are_grouped(b) || b.num_kv_heads != kv.num_kv_heads || b.head_dim != kv.head_dim ||
      kv.block_size <= 0)
    raise(Err::Internal, "attention over " + std::to_string(b.num_heads) + " heads / " +
                             std::to_string(b.num_kv_heads) + " KV heads of dim " +
                             std::to_string(b.head_dim) + " does not match a cache of " +
                             std::to_string(kv.num_kv_heads) + " KV heads of dim " +
                             std::to_string(kv.head_dim));
  if (!is_kv_dtype(kv.dtype) ||
      (kv.dtype == DType::F8_E4M3 && (kv.k_scale == nullptr || kv.v_scale == nullptr)))
    raise(Err::Internal, "attention over a " + std::string(dtype_name(kv.dtype)) +
                             " KV cache (without its scales for fp8)");
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    const AttentionSeq& seq = b.seqs[s];
    if (seq.q_len < 0 || seq.q_len > seq.ctx_len)
      raise(Err::Internal, "attention sequence " + std::to_string(s) + " has " +
                               std::to_string(seq.q_len) + " new tokens in a context of " +
                               std::to_string(seq.ctx_len));
    const int32_t blocks = (seq.ctx_len + kv.block_size - 1) / kv.block_size;
    for (int32_t j = 0; j < blocks; ++j) {
      const int32_t id = b.block_tables[seq.table_begin + j];
      if (id < 0 || id >= kv.num_blocks)
        raise(Err::Internal, "attention sequence " + std::to_string(s) + " names block " +
                                 std::to_string(id) + " of a pool of " +
                                 std::to_string(kv.num_blocks));
    }
  }
}

inline void scale_by(float* y, float f, int32_t d) {
#pragma omp simd
  for (int32_t c = 0; c < d; ++c) y[c] *= f;
}
inline void axpy(float* y, float a, const float* x, int32_t d) {
#pragma omp simd
  for (int32_t c = 0; c < d; ++c) y[c] += a * x[c];
}

// One work item: new tokens [row0, row0 + rows) of sequence `seq` against query heads
// [head0, head0 + heads) of KV heads [kvh, kvh + kvhs) (several only on the bf16 decode path);
// its vectors are numbered row-major, (row, head).
struct Block {
  int32_t seq, kvh, kvhs, head0, heads, row0, rows;
  int32_t vectors() const { return heads * rows; }
};

// The running softmax of a block's vectors over some keys: per vector the largest score m,
// l = sum of e^(score - m) and acc[d] = sum of e^(score - m) * value.
struct Running {
  float* m;
  float* l;
  float* acc;
};

// Per-thread buffers, sized for the widest block; the second group is the bf16 decode path's.
struct Scratch {
  std::vector<float> q, kt, key, value, score, m, l, acc;
  std::vector<uint32_t> qw, ktw, pw;  // bf16 pairs: queries, transposed keys, softmax weights
  std::vector<uint16_t> keyb, valueb, zero;
  const E4m3ToBf16 widen{};  // fp8 rows to bf16, its tables loaded once per call (tile_rows)
  explicit Scratch(int32_t d)
      : q(size_t(kMaxVectors) * d),
        kt(size_t(d) * kTile),
        key(size_t(kTile) * d),
        value(size_t(kTile) * d),
        score(size_t(kMaxVectors) * kTile),
        m(kMaxVectors),
        l(kMaxVectors),
        acc(size_t(kMaxVectors) * d),
        qw(size_t(kMaxVectors) * d / 2),
        ktw(size_t(d) / 2 * kTile),
        pw(size_t(kMaxVectors) * kTile / 2),
        keyb(size_t(kTile) * d),
        valueb(size_t(kTile) * d),
        zero(size_t(d)) {}
};

// vec[j] = the pool index of the (slot, KV head kvh) vector of key t0 + j, j < n: one division
// per tile rather than one per key.
void vectors_of(const KvLayerView& kv, const int32_t* table, int32_t kvh, int64_t t0, int32_t n,
                int64_t* vec) {
  const int32_t bs = kv.block_size;
  int64_t blk = t0 / bs;
  int32_t off = int32_t(t0 % bs);
  for (int32_t j = 0; j < n; ++j) {
    vec[j] = (int64_t(table[blk]) * bs + off) * kv.num_kv_heads + kvh;
    if (++off == bs) off = 0, ++blk;
  }
}

// Asks for the K and V lines (and fp8 scales) of KV heads [kvh, kvh + kvhs) of the tile two
// ahead of the one in use, into L2 (PREFETCHT1), a few lines at each of the `points` calls to
// next() that the tile's computations make: issued in one burst, a tile's prefetches (256 lines
// for the 0.5B shape's two KV heads) held every miss buffer of the core until DRAM answered,
// and the computations stalled behind them. qmpi_kernel_bench --attention, 32k bf16 KV, bf16
// path, Zen 4, alternating rounds: 1 thread 2.68-3.06 -> 1.21-1.26 ms a layer, 2 threads
// 1.75-1.90 -> 0.97-1.01. A nearer prefetch into L1 (PREFETCHNTA one tile ahead, or of the
// current V rows) measured 1.25-1.92 ms next to these; three and four tiles ahead no better.
class TilePrefetch {
 public:
  static constexpr int64_t kAhead = 2 * kTile;
  void start(const KvLayerView& kv, const int32_t* table, int32_t kvh, int32_t kvhs, int64_t t0,
             int64_t k1, int32_t points) {
    next_ = total_ = key_ = line_ = 0;
    t0 += kAhead;
    if (t0 >= k1) return;
    const int32_t n = int32_t(std::min<int64_t>(kTile, k1 - t0));
    vectors_of(kv, table, kvh, t0, n, vec_);
    k_ = static_cast<const char*>(kv.k), v_ = static_cast<const char*>(kv.v);
    row_ = int64_t(kv.head_dim) * int64_t(dtype_size(kv.dtype));
    per_key_ = int32_t((row_ * kvhs + 63) / 64);
    total_ = n * per_key_;
    step_ = (total_ + points - 1) / points;
    if (kv.dtype == DType::F8_E4M3)
      for (const float* s : {kv.k_scale, kv.v_scale})
        __builtin_prefetch(s + vec_[0], 0, kToL2), __builtin_prefetch(s + vec_[n - 1], 0, kToL2);
  }
  // The calls space the prefetches between the computations' own loads; walking the lines
  // with a running pointer instead measured 1.41 ms against 1.24 (1 thread, 32k), and pacing
  // one or two lines into the dot-product loops 1.5-1.6. The (key, line) pair is counted, not
  // divided out of next_: a division per line was an eighth of a layer's time on Zen 5.
  void next() {
    for (int32_t end = std::min(total_, next_ + step_); next_ < end; ++next_) {
      const int64_t at = vec_[key_] * row_ + int64_t(line_) * 64;
      __builtin_prefetch(k_ + at, 0, kToL2);
      __builtin_prefetch(v_ + at, 0, kToL2);
      if (++line_ == per_key_) line_ = 0, ++key_;
    }
  }

 private:
  static constexpr int kToL2 = 2;  // __builtin_prefetch's locality for PREFETCHT1
  int64_t vec_[kTile];
  const char *k_ = nullptr, *v_ = nullptr;
  int64_t row_ = 0;
  int32_t per_key_ = 1, next_ = 0, total_ = 0, step_ = 0, key_ = 0, line_ = 0;
};

// Folds keys [k0, k1) into `run` for the block's scaled queries sc.q; row r sees keys below
// limit[r]. A tile costs one rescale of each output instead of one per key, and no score
// outlives its tile (no [T, T] matrix).
void attend(const KvLayerView& kv, const int32_t* table, const Block& blk, const int64_t* limit,
            int64_t k0, int64_t k1, Scratch& sc, Running run) {
  const int32_t d = kv.head_dim, nv = blk.vectors();
  const bool fp8 = kv.dtype == DType::F8_E4M3;
  float* score = sc.score.data();
  const float* rows[kTile];
  int64_t vec[kTile];
  TilePrefetch ahead;
  for (int64_t t0 = k0; t0 < k1; t0 += kTile) {
    const int32_t nk = int32_t(std::min<int64_t>(kTile, k1 - t0));
    vectors_of(kv, table, blk.kvh, t0, nk, vec);
    ahead.start(kv, table, blk.kvh, 1, t0, k1, 4 + blk.rows);
    for (int32_t j = 0; j < nk; ++j)
      rows[j] = kv_row(kv.k, kv.dtype, vec[j] * d, d, fp8 ? kv.k_scale[vec[j]] : 1.0f,
                       sc.key.data() + j * d);
    ahead.next();
    attn::transpose_keys(rows, nk, d, sc.kt.data());
    ahead.next();
    attn::tile_scores(sc.q.data(), nv, d, sc.kt.data(), score);
    ahead.next();
    for (int32_t r = 0; r < blk.rows; ++r) {
      ahead.next();
      // Keys this row may see in the tile; the rest weigh 0.
      const int32_t seen = int32_t(std::clamp<int64_t>(limit[r] - t0, 0, nk));
      for (int32_t g = 0; g < blk.heads; ++g) {
        const int32_t v = r * blk.heads + g;
        float* sv = score + v * kTile;
        std::fill(sv + seen, sv + nk, 0.0f);
        if (seen == 0) continue;
        const float m_new = std::max(run.m[v], *std::max_element(sv, sv + seen));
        const float corr = std::exp(run.m[v] - m_new);  // 0 before the first tile (m = -inf)
        run.l[v] = run.l[v] * corr + exp_shifted_sum(sv, seen, m_new);
        if (corr != 1.0f) scale_by(run.acc + int64_t(v) * d, corr, d);
        run.m[v] = m_new;
      }
    }
    for (int32_t j = 0; j < nk; ++j)
      rows[j] = kv_row(kv.v, kv.dtype, vec[j] * d, d, fp8 ? kv.v_scale[vec[j]] : 1.0f,
                       sc.value.data() + j * d);
    ahead.next();
    attn::tile_values(score, nv, rows, nk, d, run.acc);
  }
}

#if defined(QMPI_CPU_VEC)
// The decode paths' rows of one tile (keys t0 + j, j < nk, at pool vectors vec[j]) for KV head
// `head` of the block's first: keys as bf16 pairs and values as bf16, in place or, fp8 codes,
// widened into sc's buffers (times 2^-8, kv_row_bf16); with fp8 also each row's scales, times
// 2^8, so that a score or a weight is the same float as with the codes' own values.
void tile_rows(const KvLayerView& kv, const int64_t* vec, int32_t head, int32_t nk, Scratch& sc,
               const uint32_t** keys, const uint16_t** values, float* ks, float* vs) {
  const int32_t d = kv.head_dim;
  if (kv.dtype == DType::BF16) {  // rows in place: two pointers a key, no call per row
    const uint16_t* k = static_cast<const uint16_t*>(kv.k) + int64_t(head) * d;
    const uint16_t* v = static_cast<const uint16_t*>(kv.v) + int64_t(head) * d;
    for (int32_t j = 0; j < nk; ++j) {
      keys[j] = reinterpret_cast<const uint32_t*>(k + vec[j] * d);
      values[j] = v + vec[j] * d;
    }
    return;
  }
  for (int32_t j = 0; j < nk; ++j) {
    const int64_t at = (vec[j] + head) * d;
    keys[j] = reinterpret_cast<const uint32_t*>(
        kv_row_bf16(kv.k, kv.dtype, at, d, sc.keyb.data() + j * d, sc.widen));
    values[j] = kv_row_bf16(kv.v, kv.dtype, at, d, sc.valueb.data() + j * d, sc.widen);
    if (kv.dtype == DType::F8_E4M3)
      ks[j] = kv.k_scale[at / d] * 256.0f, vs[j] = kv.v_scale[at / d] * 256.0f;
  }
}
#endif

// How far a score may pass the running shift m before m moves (the decode paths): the softmax
// weights e^(s - m) then stay below e^8 (~3000), far from float's range, and the same rounding
// applies to them whatever m is; the merge of chunks needs only that l and acc share one m.
constexpr float kSlack = 8.0f;

#if defined(QMPI_CPU_VEC)
// attend() for one decode row (every key of [k0, k1) visible) over a bf16 or fp8 cache, d a
// multiple of 2 kLanes, in float32 with attend()'s products: the tile's keys are transposed as
// stored, bf16 pairs (fp8 codes widened to bf16 exactly first), and split into float32 columns
// by a shift and a mask, rather than widened row by row and transposed as floats; values are
// widened as the P.V loop loads them; fp8 scales multiply the scores and the softmax weights; the
// shift moves by kSlack. Each key and value row is read once for all the block's query heads,
// and a block holds whole KV groups of the token (adjacent in the pool), so no cache line is
// fetched twice. qmpi_kernel_bench --attention, 2 threads, bf16 KV, alternating runs against
// attend(): 32k keys 3.5-3.9 -> 2.6-2.7 ms a layer, 8k 0.94-1.04 -> 0.65-0.77.
void attend_decode(const KvLayerView& kv, const int32_t* table, const int32_t* first,
                   const Block& blk, int64_t k0, int64_t k1, Scratch& sc, Running run) {
  using namespace vec;
  const int32_t d = kv.head_dim, words = d / 2;
  constexpr int kVecs = kTile / kLanes;
  const bool fp8 = kv.dtype == DType::F8_E4M3;
  const uint32_t* keys[kTile];
  const uint16_t* values[kTile];
  int64_t vec[kTile];
  alignas(64) float ks[kTile], vs[kTile];
  F lsum[kMaxVectors];  // per vector, l in kLanes lanes, summed at the end
  for (int32_t v = 0; v < blk.heads; ++v) lsum[v] = load_first(run.l + v, 1);
  TilePrefetch ahead;
  for (int64_t t0 = k0; t0 < k1; t0 += kTile) {
    const int32_t nk = int32_t(std::min<int64_t>(kTile, k1 - t0));
    vectors_of(kv, table, blk.kvh, t0, nk, vec);
    ahead.start(kv, table, blk.kvh, blk.kvhs, t0, k1, 3 * blk.kvhs + blk.heads);
    for (int32_t kvh = blk.kvh; kvh < blk.kvh + blk.kvhs; ++kvh) {
      const int32_t v0 = std::max(first[kvh], blk.head0) - blk.head0;
      const int32_t nv = std::min(first[kvh + 1], blk.head0 + blk.heads) - blk.head0 - v0;
      tile_rows(kv, vec, kvh - blk.kvh, nk, sc, keys, values, ks, vs);
      if (fp8) std::fill(ks + nk, ks + kTile, 1.0f), std::fill(vs + nk, vs + kTile, 1.0f);
      ahead.next();
      attn::transpose_bf16_keys(keys, nk, words, sc.kt.data());
      ahead.next();
      attn::tile_scores(sc.q.data() + int64_t(v0) * d, nv, d, sc.kt.data(), sc.score.data());
      ahead.next();
      for (int32_t i = 0; i < nv; ++i) {
        ahead.next();
        const int32_t v = v0 + i;
        float* sv = sc.score.data() + i * kTile;
        if (nk < kTile) std::fill(sv + nk, sv + kTile, -std::numeric_limits<float>::infinity());
        F s[kVecs];
        F top = splat(-std::numeric_limits<float>::infinity());
        for (int z = 0; z < kVecs; ++z) {
          s[z] = load(sv + z * kLanes);
          if (fp8) s[z] = mul(s[z], load(ks + z * kLanes));
          top = max(top, s[z]);
        }
        // The shift moves only when a score passes it by kSlack (always on the first tile, where
        // m = -inf): a reduction per tile and vector instead of an exp and a rescale.
        const float tile_max = max_of(top);
        if (tile_max > run.m[v] + kSlack) {
          const float corr = std::exp(run.m[v] - tile_max);  // 0 before the first tile
          lsum[v] = mul(lsum[v], splat(corr));
          scale_by(run.acc + int64_t(v) * d, corr, d);
          run.m[v] = tile_max;
        }
        const F shift = splat(run.m[v]);
        for (int z = 0; z < kVecs; ++z) {
          F p = exp_ps(sub(s[z], shift));  // e^-inf = 0 past nk
          lsum[v] = add(lsum[v], p);
          if (fp8) p = mul(p, load(vs + z * kLanes));
          store(sv + z * kLanes, p);
        }
      }
      attn::tile_values(sc.score.data(), nv, values, nk, d, run.acc + int64_t(v0) * d);
    }
  }
  for (int32_t v = 0; v < blk.heads; ++v) run.l[v] = sum(lsum[v]);
}
#else
void attend_decode(const KvLayerView&, const int32_t*, const int32_t*, const Block&, int64_t,
                   int64_t, Scratch&, Running) {}
#endif

#if defined(__AVX512BF16__)

// attend() for one decode row (every key of [k0, k1) visible) over a bf16 or fp8 cache, d a
// multiple of 32, in bf16 dot products: the block's queries rounded to bf16 once, each key
// tile's rows used as stored (fp8 codes widened to bf16 exactly, their scales applied to the
// scores and to the softmax weights), the weights rounded to bf16 for P.V. Each key and value
// row is read once for all the block's query heads.
void attend_bf16(const KvLayerView& kv, const int32_t* table, const int32_t* first,
                 const Block& blk, int64_t k0, int64_t k1, Scratch& sc, Running run) {
  const int32_t d = kv.head_dim, words = d / 2;
  const bool fp8 = kv.dtype == DType::F8_E4M3;
  for (int32_t i = 0; i < blk.heads * words; ++i)
    sc.qw[size_t(i)] = uint32_t(f32_to_bf16(sc.q[size_t(2 * i)])) |
                       uint32_t(f32_to_bf16(sc.q[size_t(2 * i + 1)])) << 16;
  const uint32_t* keys[kTile];
  const uint16_t* values[kTile];
  int64_t vec[kTile];
  alignas(64) float ks[kTile], vs[kTile];
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // Per vector, l in 16 lanes, summed once at the end.
  __m512 lsum[kMaxVectors];
  for (int32_t v = 0; v < blk.heads; ++v)
    lsum[v] = _mm512_maskz_mov_ps(1, _mm512_set1_ps(run.l[v]));
  TilePrefetch ahead;
  for (int64_t t0 = k0; t0 < k1; t0 += kTile) {
    const int32_t nk = int32_t(std::min<int64_t>(kTile, k1 - t0));
    vectors_of(kv, table, blk.kvh, t0, nk, vec);
    ahead.start(kv, table, blk.kvh, blk.kvhs, t0, k1, 3 * blk.kvhs + blk.heads);
    const __mmask16 seen[2] = {__mmask16((1u << std::min(nk, 16)) - 1),
                               __mmask16((1u << std::max(nk - 16, 0)) - 1)};
    // One KV head at a time: vectors [v0, v0 + nv) of the block read KV head kvh.
    for (int32_t kvh = blk.kvh; kvh < blk.kvh + blk.kvhs; ++kvh) {
      const int32_t v0 = std::max(first[kvh], blk.head0) - blk.head0;
      const int32_t nv = std::min(first[kvh + 1], blk.head0 + blk.heads) - blk.head0 - v0;
      tile_rows(kv, vec, kvh - blk.kvh, nk, sc, keys, values, ks, vs);
      for (int32_t j = nk; j < kTile; ++j)  // weight 0 against zeros: no NaN from the pool there
        values[j] = sc.zero.data(), ks[j] = vs[j] = 0.0f;
      ahead.next();
      attn::transpose_keys(keys, nk, words, sc.ktw.data());
      ahead.next();
      attn::tile_scores(sc.qw.data() + v0 * words, nv, words, sc.ktw.data(), sc.score.data());
      ahead.next();
      for (int32_t i = 0; i < nv; ++i) {
        ahead.next();
        const int32_t v = v0 + i;
        __m512 s[2], p[2];
        for (int z = 0; z < 2; ++z) {
          s[z] = _mm512_loadu_ps(sc.score.data() + i * kTile + 16 * z);
          if (fp8) s[z] = _mm512_mul_ps(s[z], _mm512_load_ps(ks + 16 * z));
          s[z] = _mm512_mask_mov_ps(neg_inf, seen[z], s[z]);
        }
        // The shift moves only when a score passes it by kSlack (always on the first tile, where
        // m = -inf): one compare instead of a reduction and an exp per tile and vector.
        const __m512 top = _mm512_max_ps(s[0], s[1]);
        if (_mm512_cmp_ps_mask(top, _mm512_set1_ps(run.m[v] + kSlack), _CMP_GT_OQ) != 0) {
          const float m_new = _mm512_reduce_max_ps(top);
          const float corr = std::exp(run.m[v] - m_new);  // 0 before the first tile
          lsum[v] = _mm512_mul_ps(lsum[v], _mm512_set1_ps(corr));
          scale_by(run.acc + int64_t(v) * d, corr, d);
          run.m[v] = m_new;
        }
        const __m512 shift = _mm512_set1_ps(run.m[v]);
        for (int z = 0; z < 2; ++z)
          p[z] = _mm512_maskz_mov_ps(seen[z], exp_ps(_mm512_sub_ps(s[z], shift)));
        lsum[v] = _mm512_add_ps(lsum[v], _mm512_add_ps(p[0], p[1]));
        if (fp8)
          for (int z = 0; z < 2; ++z) p[z] = _mm512_mul_ps(p[z], _mm512_load_ps(vs + 16 * z));
        _mm512_storeu_si512(sc.pw.data() + i * (kTile / 2),
                            (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0]));
      }
      attn::tile_values_bf16(sc.pw.data(), nv, values, nk, d, run.acc + int64_t(v0) * d);
    }
  }
  for (int32_t v = 0; v < blk.heads; ++v) {
    run.l[v] = _mm512_reduce_add_ps(lsum[v]);
    attn::to_natural_order(run.acc + int64_t(v) * d, d);
  }
}
#else
void attend_bf16(const KvLayerView&, const int32_t*, const int32_t*, const Block&, int64_t, int64_t,
                 Scratch&, Running) {}
#endif

void start(Running run, int32_t vectors, int32_t d) {
  std::fill(run.m, run.m + vectors, -std::numeric_limits<float>::infinity());
  std::fill(run.l, run.l + vectors, 0.0f);
  std::fill(run.acc, run.acc + int64_t(vectors) * d, 0.0f);
}

// The work items of a batch: per sequence and KV head, its query heads (at most kMaxVectors
// of them at a time) with as many of the sequence's new tokens as fill kMaxVectors vectors.
// Latest tokens first: they see the most keys, and dynamic scheduling ends more evenly when
// the longest items start first. With join_decode (the decode paths), a decode row's whole
// KV groups share one block while they fit: a token's K (and V) vectors of all KV heads are
// adjacent in the pool, so a block then reads whole cache lines, none of them twice.
std::vector<Block> blocks_of(const AttentionBatch& b, const std::vector<int32_t>& first,
                             bool join_decode) {
  std::vector<Block> out;
  for (int32_t s = 0; s < b.num_seqs; ++s)
    for (int32_t k = 0; k < b.num_kv_heads; ++k)
      for (int32_t h0 = first[size_t(k)]; h0 < first[size_t(k) + 1]; h0 += kMaxVectors) {
        const int32_t heads = std::min(kMaxVectors, first[size_t(k) + 1] - h0);
        const int32_t per = std::max(1, kMaxVectors / heads), q_len = b.seqs[s].q_len;
        if (join_decode && q_len == 1 && !out.empty()) {
          Block& last = out.back();
          if (last.seq == s && last.head0 == first[size_t(last.kvh)] &&
              last.head0 + last.heads == h0 && h0 + heads == first[size_t(k) + 1] &&
              last.heads + heads <= kMaxVectors) {
            ++last.kvhs, last.heads += heads;
            continue;
          }
        }
        for (int32_t end = q_len; end > 0; end -= per) {
          const int32_t row0 = std::max(0, end - per);
          out.push_back({s, k, 1, h0, heads, row0, end - row0});
        }
      }
  return out;
}

}  // namespace

void attention(const float* q, const AttentionBatch& b, const KvLayerView& kv, float* out,
               int threads, bool bf16_decode) {
  check(b, kv);
  const int32_t d = b.head_dim, H = b.num_heads;
  const bool bf16_path = kHaveBf16Dot && bf16_decode && kv.dtype != DType::F32 && d % 32 == 0;
  // Decode rows of a bf16 or fp8 cache outside the bf16 path take attend_decode.
  const bool vec_path =
      kHaveVec && !bf16_path && kv.dtype != DType::F32 && d % (2 * kVecLanes) == 0;
  // The query heads of KV head k are [first[k], first[k + 1]) (check() made them contiguous);
  // on an uneven TP split the groups of one rank differ in size.
  std::vector<int32_t> first(size_t(b.num_kv_heads) + 1, H);
  for (int32_t h = H - 1; h >= 0; --h) first[size_t(kv_head_for(b, h))] = h;
  const std::vector<Block> blocks = blocks_of(b, first, bf16_path || vec_path);
  int64_t work = 0, longest = 0;
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    work += int64_t(b.seqs[s].q_len) * b.seqs[s].ctx_len * H * d;
    longest = std::max<int64_t>(longest, b.seqs[s].ctx_len);
  }

  // With fewer blocks than threads (decode of a few sequences) each block's keys are also
  // split into chunks whose partial softmaxes are combined afterwards (flash-decoding).
  const int64_t count = int64_t(blocks.size());
  int nt = threads_for(threads, work, 1 << 15);
  int64_t chunks = 1;
  if (nt > 1 && count < 4 * int64_t(nt))
    chunks = std::clamp<int64_t>((4 * nt + count - 1) / std::max<int64_t>(1, count), 1,
                                 std::max<int64_t>(1, longest / kMinChunk));
  const int64_t items = count * chunks;
  nt = int(std::max<int64_t>(1, std::min<int64_t>(nt, items)));
  // Chunks' running softmaxes, [block, chunk, vector] (empty with one chunk).
  const int64_t parts = chunks > 1 ? items * kMaxVectors : 0;
  std::vector<float> part_m(static_cast<size_t>(parts)), part_l(part_m.size()),
      part_acc(part_m.size() * size_t(d));

#pragma omp parallel num_threads(nt)
  {
    Scratch sc(d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const Block& blk = blocks[size_t(it / chunks)];
      const int64_t c = it % chunks;
      const AttentionSeq& seq = b.seqs[blk.seq];
      int64_t limit[kMaxVectors];
      for (int32_t r = 0; r < blk.rows; ++r)
        limit[r] = int64_t(seq.ctx_len) - seq.q_len + blk.row0 + r + 1;
      const int64_t keys = limit[blk.rows - 1];
      const int64_t len = ((keys + chunks - 1) / chunks + kTile - 1) / kTile * kTile;
      const int64_t k0 = std::min(keys, c * len), k1 = std::min(keys, k0 + len);
      for (int32_t r = 0; r < blk.rows; ++r) {
        const float* src = q + ((int64_t(seq.q_begin) + blk.row0 + r) * H + blk.head0) * d;
        float* dst = sc.q.data() + int64_t(r) * blk.heads * d;
        for (int64_t e = 0; e < int64_t(blk.heads) * d; ++e) dst[e] = src[e] * b.scale;
      }
      Running run{sc.m.data(), sc.l.data(), sc.acc.data()};
      if (chunks > 1)
        run = {part_m.data() + it * kMaxVectors, part_l.data() + it * kMaxVectors,
               part_acc.data() + it * kMaxVectors * d};
      start(run, blk.vectors(), d);
      if (bf16_path && seq.q_len == 1)
        attend_bf16(kv, b.block_tables + seq.table_begin, first.data(), blk, k0, k1, sc, run);
      else if (vec_path && seq.q_len == 1)
        attend_decode(kv, b.block_tables + seq.table_begin, first.data(), blk, k0, k1, sc, run);
      else
        attend(kv, b.block_tables + seq.table_begin, blk, limit, k0, k1, sc, run);
      if (chunks == 1)
        for (int32_t v = 0; v < blk.vectors(); ++v) {
          const int64_t row = int64_t(seq.q_begin) + blk.row0 + v / blk.heads;
          float* o = out + (row * H + blk.head0 + v % blk.heads) * d;
          std::copy(run.acc + int64_t(v) * d, run.acc + int64_t(v + 1) * d, o);
          scale_by(o, 1.0f / run.l[v], d);
        }
    }
    if (chunks > 1) {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i) {
        const Block& blk = blocks[size_t(i)];
        const int64_t q_begin = b.seqs[blk.seq].q_begin;
        for (int32_t v = 0; v < blk.vectors(); ++v) {
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t c = 0; c < chunks; ++c)
            mx = std::max(mx, part_m[size_t((i * chunks + c) * kMaxVectors + v)]);
          const int64_t row = q_begin + blk.row0 + v / blk.heads;
          float* o = out + (row * H + blk.head0 + v % blk.heads) * d;
          std::fill(o, o + d, 0.0f);
          float total = 0.0f;
          for (int64_t c = 0; c < chunks; ++c) {
            const int64_t at = (i * chunks + c) * kMaxVectors + v;
            if (part_l[size_t(at)] == 0.0f) continue;  // a chunk past this row's keys
            const float w = std::exp(part_m[size_t(at)] - mx);
            total += part_l[size_t(at)] * w;
            axpy(o, w, part_acc.data() + at * d, d);
          }
          scale_by(o, 1.0f / total, d);
        }
      }
    }
  }
}

}  // namespace qmpi::cpu
