#include "kernels/cpu/attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd_math.h"

namespace qmpi::cpu {
namespace {

void check(const AttentionBatch& b, const KvLayerView& kv) {
  if (!heads_are_grouped(b) || b.num_kv_heads != kv.num_kv_heads || b.head_dim != kv.head_dim ||
      kv.block_size <= 0)
    raise(Err::Internal, "attention over " + std::to_string(b.num_heads) + " heads / " +
                             std::to_string(b.num_kv_heads) + " KV heads of dim " +
                             std::to_string(b.head_dim) + " does not match a cache of " +
                             std::to_string(kv.num_kv_heads) + " KV heads of dim " +
                             std::to_string(kv.head_dim));
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

inline float dot(const float* a, const float* b, int32_t d) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int32_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// One new token of one sequence.
struct QueryRow {
  int32_t seq;
  int32_t index;  // among the sequence's new tokens
};

}  // namespace

void attention(const float* q, const AttentionBatch& b, const KvLayerView& kv, float* out,
               int threads) {
  check(b, kv);
  std::vector<QueryRow> rows;
  int64_t work = 0;
  for (int32_t s = 0; s < b.num_seqs; ++s)
    for (int32_t i = 0; i < b.seqs[s].q_len; ++i) {
      rows.push_back({s, i});
      work += int64_t(b.seqs[s].ctx_len) * b.num_heads * b.head_dim;
    }
  const int32_t d = b.head_dim, kvh_count = b.num_kv_heads;
  const int32_t bs = kv.block_size;
  // The query heads of KV head k are [first[k], first[k + 1]) (check() made them contiguous);
  // on an uneven TP split the groups of one rank differ in size.
  std::vector<int32_t> first(size_t(kvh_count) + 1, b.num_heads);
  for (int32_t h = b.num_heads - 1; h >= 0; --h) first[size_t(kv_head_for(b, h))] = h;
  int32_t widest = 0;
  for (int32_t k = 0; k < kvh_count; ++k) widest = std::max(widest, first[k + 1] - first[k]);
  // A work item is one query row and one KV head: the group's query heads share each key and
  // value read.
  const int64_t items = int64_t(rows.size()) * kvh_count;
  const int nt = int(std::min<int64_t>(threads_for(threads, work, 1 << 15), items));
#pragma omp parallel num_threads(std::max(nt, 1))
  {
    std::vector<float> scores;
    std::vector<float> inv(static_cast<size_t>(widest));
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const QueryRow r = rows[size_t(it / kvh_count)];
      const int32_t kvh = int32_t(it % kvh_count);
      const AttentionSeq& seq = b.seqs[r.seq];
      const int32_t* table = b.block_tables + seq.table_begin;
      const int64_t keys = int64_t(seq.ctx_len) - seq.q_len + r.index + 1;
      const int64_t qrow = int64_t(seq.q_begin) + r.index;
      const int32_t group = first[size_t(kvh) + 1] - first[size_t(kvh)];
      const float* qg = q + (qrow * b.num_heads + first[size_t(kvh)]) * d;
      float* og = out + (qrow * b.num_heads + first[size_t(kvh)]) * d;
      scores.resize(size_t(group * keys));

      for (int64_t t0 = 0; t0 < keys; t0 += bs) {
        const int64_t base = int64_t(table[t0 / bs]) * bs;
        const int64_t cnt = std::min<int64_t>(bs, keys - t0);
        for (int64_t o = 0; o < cnt; ++o) {
          const float* kp = kv.k + ((base + o) * kvh_count + kvh) * d;
          for (int32_t g = 0; g < group; ++g)
            scores[size_t(g * keys + t0 + o)] = dot(qg + g * d, kp, d) * b.scale;
        }
      }
      for (int32_t g = 0; g < group; ++g) {
        float* sg = scores.data() + g * keys;
        const float mx = *std::max_element(sg, sg + keys);
        inv[size_t(g)] = 1.0f / exp_shifted_sum(sg, keys, mx);
      }
      std::fill(og, og + int64_t(group) * d, 0.0f);
      for (int64_t t0 = 0; t0 < keys; t0 += bs) {
        const int64_t base = int64_t(table[t0 / bs]) * bs;
        const int64_t cnt = std::min<int64_t>(bs, keys - t0);
        for (int64_t o = 0; o < cnt; ++o) {
          const float* vp = kv.v + ((base + o) * kvh_count + kvh) * d;
          for (int32_t g = 0; g < group; ++g) {
            const float p = scores[size_t(g * keys + t0 + o)];
            float* dst = og + g * d;
#pragma omp simd
            for (int32_t c = 0; c < d; ++c) dst[c] += p * vp[c];
          }
        }
      }
      for (int32_t g = 0; g < group; ++g) {
        float* dst = og + g * d;
        const float f = inv[size_t(g)];
#pragma omp simd
        for (int32_t c = 0; c < d; ++c) dst[c] *= f;
      }
    }
  }
}

}  // namespace qmpi::cpu
