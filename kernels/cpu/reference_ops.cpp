#include "kernels/cpu/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/kv_dtype.h"

namespace qmpi::cpu::ref {

void matmul(const float* x, int64_t n, const WeightView& w, const WeightView* bias, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = bias ? load_as_f32(bias->data, bias->dtype, r) : 0.0;
      for (int64_t c = 0; c < w.cols; ++c)
        s += double(x[i * w.cols + c]) * load_as_f32(w.data, w.dtype, r * w.cols + c);
      out[i * w.rows + r] = float(s);
    }
  }
}

void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out) {
  const int64_t width = w.cols;
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * width;
    double ss = 0;
    for (int64_t c = 0; c < width; ++c) ss += double(xi[c]) * xi[c];
    double inv = 1.0 / std::sqrt(ss / double(width) + eps);
    for (int64_t c = 0; c < width; ++c)
      out[i * width + c] = float(xi[c] * inv * load_as_f32(w.data, w.dtype, c));
  }
}

void rope(float* x, int64_t n, int32_t heads, const int32_t* positions, const RopeFreqs& f) {
  const int32_t half = f.head_dim / 2;
  for (int64_t i = 0; i < n; ++i) {
    const float* inv_freq = f.inv_freq + (f.rows == 1 ? 0 : i * half);
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + (i * heads + h) * f.head_dim;
      for (int32_t m = 0; m < half; ++m) {
        float angle = float(positions[i]) * inv_freq[m];
        double c = double(float(std::cos(double(angle))) * f.attention);
        double s = double(float(std::sin(double(angle))) * f.attention);
        double a = v[m], b = v[m + half];
        v[m] = float(a * c - b * s);
        v[m + half] = float(b * c + a * s);
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out) {
  for (int64_t i = 0; i < n * width; ++i) {
    double g = gate[i];
    out[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void add(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = x[i] + y[i];
}

void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
               float* out) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = int64_t(ids[i]) - row_offset;
    for (int64_t c = 0; c < table.cols; ++c)
      out[i * table.cols + c] = (r >= 0 && r < table.rows)
                                    ? load_as_f32(table.data, table.dtype, r * table.cols + c)
                                    : 0.0f;
  }
}

void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width, float* dst) {
  for (int64_t i = 0; i < count; ++i)
    for (int64_t c = 0; c < width; ++c) dst[i * width + c] = src[int64_t(rows[i]) * width + c];
}

void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                      int64_t width, float* dst) {
  for (int64_t i = 0; i < count; ++i)
    for (int64_t c = 0; c < width; ++c)
      dst[int64_t(rows[i]) * width + c] =
          float(double(dst[int64_t(rows[i]) * width + c]) + double(scales[i]) * src[i * width + c]);
}

namespace {

// Element c of the vector `vec` ((slot, KV head) index) of a K or V pool, as a double.
double kv_at(const KvLayerView& kv, const void* pool, const float* scales, int64_t vec, int32_t c) {
  const int64_t i = vec * kv.head_dim + c;
  if (kv.dtype == DType::F32) return static_cast<const float*>(pool)[i];
  if (kv.dtype == DType::BF16) return bf16_to_f32(static_cast<const uint16_t*>(pool)[i]);
  return double(e4m3_to_f32(static_cast<const uint8_t*>(pool)[i])) * scales[vec];
}

void kv_put(const KvLayerView& kv, void* pool, float* scales, int64_t vec, const float* x) {
  const int32_t d = kv.head_dim;
  for (int32_t c = 0; c < d; ++c) {
    const int64_t i = vec * d + c;
    if (kv.dtype == DType::F32) static_cast<float*>(pool)[i] = x[c];
    if (kv.dtype == DType::BF16) static_cast<uint16_t*>(pool)[i] = f32_to_bf16(x[c]);
  }
  if (kv.dtype != DType::F8_E4M3) return;
  float amax = 0.0f;
  for (int32_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(x[c]));
  scales[vec] = e4m3_scale(amax);
  for (int32_t c = 0; c < d; ++c)
    static_cast<uint8_t*>(pool)[vec * d + c] = f32_to_e4m3(x[c] / scales[vec]);
}

}  // namespace

void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
              const KvLayerView& kv) {
  const int64_t row = int64_t(kv.num_kv_heads) * kv.head_dim;
  for (int64_t i = 0; i < n; ++i)
    for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
      const int64_t vec = int64_t(slots[i]) * kv.num_kv_heads + h;
      kv_put(kv, kv.k, kv.k_scale, vec, k + i * row + h * kv.head_dim);
      kv_put(kv, kv.v, kv.v_scale, vec, v + i * row + h * kv.head_dim);
    }
}

void attention(const float* q, const AttentionBatch& b, const KvLayerView& kv, float* out) {
  const int32_t d = b.head_dim;
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    const AttentionSeq& seq = b.seqs[s];
    const int32_t* table = b.block_tables + seq.table_begin;
    // The (slot, KV head) vector of key t of head kvh of this sequence.
    auto vec_of = [&](int32_t t, int32_t kvh) {
      int64_t slot = int64_t(table[t / kv.block_size]) * kv.block_size + t % kv.block_size;
      return slot * kv.num_kv_heads + kvh;
    };
    for (int32_t i = 0; i < seq.q_len; ++i) {
      const int32_t pos = seq.ctx_len - seq.q_len + i;
      for (int32_t h = 0; h < b.num_heads; ++h) {
        const int32_t kvh = kv_head_for(b, h);
        const float* qv = q + (int64_t(seq.q_begin + i) * b.num_heads + h) * d;
        std::vector<double> score(pos + 1);
        double mx = -std::numeric_limits<double>::infinity();
        for (int32_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int32_t c = 0; c < d; ++c)
            dot += double(qv[c]) * kv_at(kv, kv.k, kv.k_scale, vec_of(t, kvh), c);
          score[t] = dot * b.scale;
          mx = std::max(mx, score[t]);
        }
        double sum = 0;
        for (double& sc : score) sum += (sc = std::exp(sc - mx));
        float* o = out + (int64_t(seq.q_begin + i) * b.num_heads + h) * d;
        for (int32_t c = 0; c < d; ++c) {
          double acc = 0;
          for (int32_t t = 0; t <= pos; ++t)
            acc += score[t] * kv_at(kv, kv.v, kv.v_scale, vec_of(t, kvh), c);
          o[c] = float(acc / sum);
        }
      }
    }
  }
}

double log_sum_exp(const float* x, int64_t n) {
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  return mx + std::log(sum);
}

}  // namespace qmpi::cpu::ref
