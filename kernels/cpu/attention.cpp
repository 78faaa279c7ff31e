#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/kv_decode.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd_math.h"
#include "kernels/kv_dtype.h"

namespace qmpi::cpu {
namespace {

// Keys per online-softmax step: their scores for every query head of a group and their
// converted K (or V) rows stay in L1, and one max / rescale of the running output serves all.
constexpr int32_t kTile = 32;
// Fewest keys worth a work item of their own when a long context is split over threads.
constexpr int64_t kMinChunk = 256;

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

// y *= f and y += a * x: the plain loops vectorize as they are.
inline void scale_by(float* y, float f, int32_t d) {
#pragma omp simd
  for (int32_t c = 0; c < d; ++c) y[c] *= f;
}
inline void axpy(float* y, float a, const float* x, int32_t d) {
#pragma omp simd
  for (int32_t c = 0; c < d; ++c) y[c] += a * x[c];
}

#if defined(__AVX512F__)
// The sums of a[0..15]'s elements, in order: 45 unpacks, shuffles and adds where 16 horizontal
// reductions would take about 150 instructions.
inline __m512 sum16(const __m512* a) {
  __m512 b[8], c[4];
  for (int k = 0; k < 8; ++k)  // per 128-bit lane: a[2k] and a[2k+1], two partial sums each
    b[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k], a[2 * k + 1]),
                         _mm512_unpackhi_ps(a[2 * k], a[2 * k + 1]));
  for (int k = 0; k < 4; ++k) {  // per lane: one partial sum of each of keys 4k .. 4k + 3
    const __m512d x = _mm512_castps_pd(b[2 * k]), y = _mm512_castps_pd(b[2 * k + 1]);
    c[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 d0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
  const __m512 d1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xdd));
}
#endif

// score[g * kTile + j] = q_g . keys[j] for the group's query heads g and the tile's nk keys.
void tile_scores(const float* q, int32_t group, const float* const* keys, int32_t nk, int32_t d,
                 float* score) {
#if defined(__AVX512F__)
  for (int32_t g = 0; g < group; ++g)
    for (int32_t j0 = 0; j0 < nk; j0 += 16) {
      const int32_t m = std::min(16, nk - j0);
      __m512 acc[16];
      for (__m512& a : acc) a = _mm512_setzero_ps();
      for (int32_t c = 0; c < d; c += 16) {
        const __mmask16 lanes = d - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - c)) - 1);
        const __m512 qv = _mm512_maskz_loadu_ps(lanes, q + g * d + c);
        for (int32_t j = 0; j < m; ++j)
          acc[j] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(lanes, keys[j0 + j] + c), acc[j]);
      }
      _mm512_mask_storeu_ps(score + g * kTile + j0, __mmask16((1u << m) - 1), sum16(acc));
    }
#else
  for (int32_t g = 0; g < group; ++g)
    for (int32_t j = 0; j < nk; ++j) {
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int32_t c = 0; c < d; ++c) s += q[g * d + c] * keys[j][c];
      score[g * kTile + j] = s;
    }
#endif
}

// acc_g += sum over j of p[g * kTile + j] * values[j], for the group's heads and nk values.
void tile_values(const float* p, int32_t group, const float* const* values, int32_t nk, int32_t d,
                 float* acc) {
#if defined(__AVX512F__)
  for (int32_t g = 0; g < group; ++g)
    for (int32_t c = 0; c < d; c += 16) {  // 16 output dims stay in a register over the tile
      const __mmask16 lanes = d - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - c)) - 1);
      float* out = acc + g * d + c;
      __m512 a = _mm512_maskz_loadu_ps(lanes, out);
      for (int32_t j = 0; j < nk; ++j)
        a = _mm512_fmadd_ps(_mm512_set1_ps(p[g * kTile + j]),
                            _mm512_maskz_loadu_ps(lanes, values[j] + c), a);
      _mm512_mask_storeu_ps(out, lanes, a);
    }
#else
  for (int32_t g = 0; g < group; ++g)
    for (int32_t j = 0; j < nk; ++j) {
      const float w = p[g * kTile + j];
#pragma omp simd
      for (int32_t c = 0; c < d; ++c) acc[g * d + c] += w * values[j][c];
    }
#endif
}

// One new token of one sequence.
struct QueryRow {
  int32_t seq;
  int32_t index;  // among the sequence's new tokens
};

// The running softmax of `group` query heads over some keys: per head the largest score m,
// l = sum of e^(score - m) and acc[d] = sum of e^(score - m) * value.
struct Running {
  float* m;
  float* l;
  float* acc;
};

// Per-thread buffers, sized for the widest group.
struct Scratch {
  std::vector<float> q, key, value, score, m, l, acc;
  Scratch(int32_t widest, int32_t d)
      : q(size_t(widest) * d),
        key(size_t(kTile) * d),
        value(size_t(kTile) * d),
        score(size_t(widest) * kTile),
        m(size_t(widest)),
        l(size_t(widest)),
        acc(size_t(widest) * d) {}
};

// Folds keys [k0, k1) of KV head kvh of the sequence with block table `table` into `run`, for
// `group` query heads whose scaled queries are sc.q. A tile of kTile keys costs one rescale of
// the output instead of one per key, and no score outlives its tile (no [T, T] matrix).
void attend(const KvLayerView& kv, const int32_t* table, int32_t kvh, int64_t k0, int64_t k1,
            int32_t group, Scratch& sc, Running run) {
  const int32_t d = kv.head_dim, bs = kv.block_size;
  const bool fp8 = kv.dtype == DType::F8_E4M3;
  float* score = sc.score.data();
  const float* rows[kTile];
  // The pool index of the tile's key j (a (slot, KV head) vector).
  auto vector_of = [&](int64_t t) {
    return (int64_t(table[t / bs]) * bs + t % bs) * kv.num_kv_heads + kvh;
  };
  for (int64_t t0 = k0; t0 < k1; t0 += kTile) {
    const int32_t nk = int32_t(std::min<int64_t>(kTile, k1 - t0));
    for (int32_t j = 0; j < nk; ++j) {
      const int64_t vec = vector_of(t0 + j);
      rows[j] =
          kv_row(kv.k, kv.dtype, vec * d, d, fp8 ? kv.k_scale[vec] : 1.0f, sc.key.data() + j * d);
    }
    tile_scores(sc.q.data(), group, rows, nk, d, score);
    for (int32_t g = 0; g < group; ++g) {
      float* sg = score + g * kTile;
      const float m_new = std::max(run.m[g], *std::max_element(sg, sg + nk));
      const float corr = std::exp(run.m[g] - m_new);  // 0 before the first tile (m = -inf)
      run.l[g] = run.l[g] * corr + exp_shifted_sum(sg, nk, m_new);
      if (corr != 1.0f) scale_by(run.acc + g * d, corr, d);
      run.m[g] = m_new;
    }
    for (int32_t j = 0; j < nk; ++j) {
      const int64_t vec = vector_of(t0 + j);
      rows[j] =
          kv_row(kv.v, kv.dtype, vec * d, d, fp8 ? kv.v_scale[vec] : 1.0f, sc.value.data() + j * d);
    }
    tile_values(score, group, rows, nk, d, run.acc);
  }
}

void start(Running run, int32_t group, int32_t d) {
  std::fill(run.m, run.m + group, -std::numeric_limits<float>::infinity());
  std::fill(run.l, run.l + group, 0.0f);
  std::fill(run.acc, run.acc + int64_t(group) * d, 0.0f);
}

}  // namespace

void attention(const float* q, const AttentionBatch& b, const KvLayerView& kv, float* out,
               int threads) {
  check(b, kv);
  std::vector<QueryRow> rows;
  int64_t work = 0, longest = 0;
  for (int32_t s = 0; s < b.num_seqs; ++s)
    for (int32_t i = 0; i < b.seqs[s].q_len; ++i) {
      rows.push_back({s, i});
      work += int64_t(b.seqs[s].ctx_len) * b.num_heads * b.head_dim;
      longest = std::max<int64_t>(longest, b.seqs[s].ctx_len);
    }
  const int32_t d = b.head_dim, kvh_count = b.num_kv_heads, H = b.num_heads;
  // The query heads of KV head k are [first[k], first[k + 1]) (check() made them contiguous);
  // on an uneven TP split the groups of one rank differ in size.
  std::vector<int32_t> first(size_t(kvh_count) + 1, H);
  for (int32_t h = H - 1; h >= 0; --h) first[size_t(kv_head_for(b, h))] = h;
  int32_t widest = 0;
  for (int32_t k = 0; k < kvh_count; ++k) widest = std::max(widest, first[k + 1] - first[k]);

  // A pair is one query row and one KV head: the group's query heads share each key and value
  // read. With fewer pairs than threads (decode of a few sequences) each pair's keys are also
  // split into chunks whose partial softmaxes are combined afterwards (flash-decoding).
  const int64_t pairs = int64_t(rows.size()) * kvh_count;
  int nt = threads_for(threads, work, 1 << 15);
  int64_t chunks = 1;
  if (nt > 1 && pairs < 4 * int64_t(nt))
    chunks = std::clamp<int64_t>((4 * nt + pairs - 1) / pairs, 1,
                                 std::max<int64_t>(1, longest / kMinChunk));
  const int64_t items = pairs * chunks;
  nt = int(std::max<int64_t>(1, std::min<int64_t>(nt, items)));
  // Chunks' running softmaxes, [pair, chunk, head of the group] (empty with one chunk).
  const int64_t parts = chunks > 1 ? items * widest : 0;
  std::vector<float> part_m(static_cast<size_t>(parts)), part_l(part_m.size()),
      part_acc(part_m.size() * size_t(d));

#pragma omp parallel num_threads(nt)
  {
    Scratch sc(widest, d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t pair = it / chunks, c = it % chunks;
      const QueryRow r = rows[size_t(pair / kvh_count)];
      const int32_t kvh = int32_t(pair % kvh_count);
      const AttentionSeq& seq = b.seqs[r.seq];
      const int64_t keys = int64_t(seq.ctx_len) - seq.q_len + r.index + 1;
      const int64_t qrow = int64_t(seq.q_begin) + r.index;
      const int32_t h0 = first[size_t(kvh)], group = first[size_t(kvh) + 1] - h0;
      const int64_t len = ((keys + chunks - 1) / chunks + kTile - 1) / kTile * kTile;
      const int64_t k0 = std::min(keys, c * len), k1 = std::min(keys, k0 + len);
      for (int64_t e = 0; e < int64_t(group) * d; ++e)
        sc.q[size_t(e)] = q[(qrow * H + h0) * d + e] * b.scale;
      Running run{sc.m.data(), sc.l.data(), sc.acc.data()};
      if (chunks > 1)
        run = {part_m.data() + it * widest, part_l.data() + it * widest,
               part_acc.data() + it * widest * d};
      start(run, group, d);
      attend(kv, b.block_tables + seq.table_begin, kvh, k0, k1, group, sc, run);
      if (chunks == 1)
        for (int32_t g = 0; g < group; ++g) {
          float* o = out + (qrow * H + h0 + g) * d;
          std::copy(run.acc + g * d, run.acc + (g + 1) * d, o);
          scale_by(o, 1.0f / run.l[g], d);
        }
    }
    if (chunks > 1) {
#pragma omp for schedule(static)
      for (int64_t pair = 0; pair < pairs; ++pair) {
        const QueryRow r = rows[size_t(pair / kvh_count)];
        const int32_t kvh = int32_t(pair % kvh_count);
        const int64_t qrow = int64_t(b.seqs[r.seq].q_begin) + r.index;
        const int32_t h0 = first[size_t(kvh)], group = first[size_t(kvh) + 1] - h0;
        for (int32_t g = 0; g < group; ++g) {
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t c = 0; c < chunks; ++c)
            mx = std::max(mx, part_m[size_t((pair * chunks + c) * widest + g)]);
          float* o = out + (qrow * H + h0 + g) * d;
          std::fill(o, o + d, 0.0f);
          float total = 0.0f;
          for (int64_t c = 0; c < chunks; ++c) {
            const int64_t at = (pair * chunks + c) * widest + g;
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
