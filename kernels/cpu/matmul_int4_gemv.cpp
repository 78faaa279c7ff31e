// The decode-time int4 matmul: each weight word is read once, its 8 nibbles are widened to
// float32 in registers and multiplied with up to kXRows rows of x, so the op streams half a byte
// per weight. Zero points leave the inner loop: sum_k (q - z) s x = s (sum_k q x - z sum_k x),
// and the per-group sums of x are computed once per call.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

constexpr int kXRows = 4;
// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;

// x prepared for the GEMV: for x row i, plane j holds input 8w + j of every word w (so one
// vector load gives the j-th input of 16 consecutive words), zero-padded by a vector past the
// last word; and the sum of x over every group.
struct PackedX {
  int64_t stride;                  // floats per plane
  AlignedArray<float> planes;      // [n][8][stride]
  AlignedArray<float> group_sums;  // [n][groups]
};

PackedX pack_x(const float* x, int64_t n, const Int4WeightView& w) {
  const int64_t kp = w.words * 8;
  PackedX p{w.words + 16, make_aligned<float>(size_t(n * 8 * (w.words + 16))),
            make_aligned<float>(size_t(n * w.groups))};
  AlignedArray<float> xg = make_aligned<float>(size_t(n * kp));
  gather_int4_input(x, n, w, xg.get());
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = xg.get() + i * kp;
    float* planes = p.planes.get() + i * 8 * p.stride;
    std::fill(planes, planes + 8 * p.stride, 0.0f);
    for (int64_t v = 0; v < w.words; ++v)
      for (int j = 0; j < 8; ++j) planes[j * p.stride + v] = xi[v * 8 + j];
    for (int64_t g = 0; g < w.groups; ++g) {
      float s = 0.0f;
      for (int64_t k = int64_t(w.group_words[g]) * 8; k < int64_t(w.group_words[g + 1]) * 8; ++k)
        s += xi[k];
      p.group_sums[i * w.groups + g] = s;
    }
  }
  return p;
}

#if defined(__AVX512F__)

// Output row r times XR rows of x starting at xrow.
template <int XR>
void row_tile(const Int4WeightView& w, const PackedX& px, int64_t r, int64_t xrow,
              const float* bias, float* out) {
  const uint32_t* q = w.qweight + r * w.words;
  const __m512i nibble = _mm512_set1_epi32(15);
  __m512 tot[XR];
  float zero_term[XR];
  const float* planes[XR];
  for (int j = 0; j < XR; ++j) {
    tot[j] = _mm512_setzero_ps();
    zero_term[j] = 0.0f;
    planes[j] = px.planes.get() + (xrow + j) * 8 * px.stride;
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t wb = w.group_words[g], we = w.group_words[g + 1];
    __m512 acc[XR];
    for (int j = 0; j < XR; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t v = wb; v < we; v += 16) {
      const __mmask16 m = we - v >= 16 ? __mmask16(0xffff) : __mmask16((1u << (we - v)) - 1);
      const __m512i words = _mm512_maskz_loadu_epi32(m, q + v);
      for (int b = 0; b < 8; ++b) {
        const __m512 qs =
            _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(words, unsigned(4 * b)), nibble));
        for (int j = 0; j < XR; ++j)
          acc[j] = _mm512_fmadd_ps(qs, _mm512_loadu_ps(planes[j] + b * px.stride + v), acc[j]);
      }
    }
    const float s = f16_to_f32(w.scales[r * w.groups + g]);
    const float z = float(w.zeros[r * w.groups + g]);
    const __m512 sv = _mm512_set1_ps(s);
    for (int j = 0; j < XR; ++j) {
      tot[j] = _mm512_fmadd_ps(sv, acc[j], tot[j]);
      zero_term[j] += s * z * px.group_sums[(xrow + j) * w.groups + g];
    }
  }
  for (int j = 0; j < XR; ++j)
    out[(xrow + j) * w.rows + r] =
        _mm512_reduce_add_ps(tot[j]) - zero_term[j] + (bias ? bias[r] : 0.0f);
}

void rows_range(const Int4WeightView& w, const PackedX& px, int64_t n, int64_t r0, int64_t r1,
                const float* bias, float* out) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < n; j += kXRows) {
      switch (std::min<int64_t>(kXRows, n - j)) {
        case 4:
          row_tile<4>(w, px, r, j, bias, out);
          break;
        case 3:
          row_tile<3>(w, px, r, j, bias, out);
          break;
        case 2:
          row_tile<2>(w, px, r, j, bias, out);
          break;
        default:
          row_tile<1>(w, px, r, j, bias, out);
          break;
      }
    }
}

#else  // portable: the same sums over a row widened to float32

void rows_range(const Int4WeightView& w, const PackedX& px, int64_t n, int64_t r0, int64_t r1,
                const float* bias, float* out) {
  AlignedArray<float> row = make_aligned<float>(size_t(w.words * 8));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_int4_rows(w, r, r + 1, row.get());
    for (int64_t i = 0; i < n; ++i) {
      const float* planes = px.planes.get() + i * 8 * px.stride;
      float s = 0.0f;
      for (int64_t v = 0; v < w.words; ++v)
        for (int j = 0; j < 8; ++j) s += row[v * 8 + j] * planes[j * px.stride + v];
      out[i * w.rows + r] = s + (bias ? bias[r] : 0.0f);
    }
  }
}

#endif

}  // namespace

void matmul_int4_gemv(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt) {
  const PackedX px = pack_x(x, n, w);
  AlignedArray<float> b = widen(bias);
  const int nt = threads_for(opt.threads, w.rows * w.words * 8, kGrain);
#pragma omp parallel num_threads(nt)
  {
    const Range rr = split_range(w.rows, 4, omp_get_thread_num(), omp_get_num_threads());
    rows_range(w, px, n, rr.begin, rr.end, b.get(), out);
  }
}

}  // namespace qmpi::cpu
