// The FP8 matmul's checks, reference and decode GEMV. The GEMV gives each thread a contiguous
// run of weight rows; a row's bytes are decoded 16 at a time in registers (e4m3 -> f16 bits by
// shifts, then VCVTPH2PS, exact for every finite code, subnormals included) and multiplied by the
// block's scale before up to 8 rows of x use them, so each weight byte is read once per 8 tokens;
// rows go in pairs, two independent FMA chains sharing each load of x.
#include "kernels/cpu/matmul_fp8.h"

#include <array>
#include <string>

#include "core/errors.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;
// Rows of x one pass over a weight row serves.
constexpr int kTokens = 8;

#if defined(__AVX512F__)

// 16 e4m3 codes as float32 times `scale256` (the block scale times 2^8): the code's sign moves
// to f16's bit 15 and its 7 exponent+mantissa bits to f16's bits 7..13, which reads as the same
// value times 2^-8 (f16's exponent bias is 15, e4m3's 7), subnormals included.
inline __m512 decode16(__m128i codes, __m512 scale256) {
  const __m256i v = _mm256_cvtepu8_epi16(codes);
  const __m256i h =
      _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(v, 8), _mm256_set1_epi16(int16_t(0x8000))),
                      _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(0x3f80)));
  return _mm512_mul_ps(_mm512_cvtph_ps(h), scale256);
}

// Rows r and r + 1 (two independent FMA chains per token, sharing each load of x) times rows
// [t0, t0 + T) of x.
template <int T>
void rows_times_x(const Fp8WeightView& w, int64_t r, const float* x, int64_t t0, const float* bias,
                  float* out) {
  __m512 acc[2][T];
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  const uint8_t* q0 = w.q + r * w.cols;
  const uint8_t* q1 = q0 + w.cols;
  for (int64_t k = 0; k < w.cols;) {
    const int64_t end = fp8_block_end(w, k);
    const __m512 s0 = _mm512_set1_ps(fp8_scale(w, r, k) * 256.0f);
    const __m512 s1 = _mm512_set1_ps(fp8_scale(w, r + 1, k) * 256.0f);
    for (; k < end; k += 16) {
      const int64_t left = end - k;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      const __m512 w0 = decode16(_mm_maskz_loadu_epi8(m, q0 + k), s0);
      const __m512 w1 = decode16(_mm_maskz_loadu_epi8(m, q1 + k), s1);
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + (t0 + t) * w.cols + k);
        acc[0][t] = _mm512_fmadd_ps(w0, xv, acc[0][t]);
        acc[1][t] = _mm512_fmadd_ps(w1, xv, acc[1][t]);
      }
    }
    k = end;
  }
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < 2; ++i)
      out[(t0 + t) * w.rows + r + i] =
          _mm512_reduce_add_ps(acc[i][t]) + (bias ? bias[r + i] : 0.0f);
}

template <int T>
void row_times_x(const Fp8WeightView& w, int64_t r, const float* x, int64_t t0, const float* bias,
                 float* out) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const uint8_t* q = w.q + r * w.cols;
  for (int64_t k = 0; k < w.cols;) {
    const int64_t end = fp8_block_end(w, k);
    const __m512 s = _mm512_set1_ps(fp8_scale(w, r, k) * 256.0f);
    for (; k < end; k += 16) {
      const int64_t left = end - k;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      const __m512 wv = decode16(_mm_maskz_loadu_epi8(m, q + k), s);
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (t0 + t) * w.cols + k), acc[t]);
    }
    k = end;
  }
  for (int t = 0; t < T; ++t)
    out[(t0 + t) * w.rows + r] = _mm512_reduce_add_ps(acc[t]) + (bias ? bias[r] : 0.0f);
}

#else  // portable: the table, one element at a time

template <int T>
void row_times_x(const Fp8WeightView& w, int64_t r, const float* x, int64_t t0, const float* bias,
                 float* out) {
  const float* lut = e4m3_table();
  float acc[T] = {};
  const uint8_t* q = w.q + r * w.cols;
  for (int64_t k = 0; k < w.cols;) {
    const int64_t end = fp8_block_end(w, k);
    const float s = fp8_scale(w, r, k);
    for (; k < end; ++k) {
      const float wk = lut[q[k]] * s;
      for (int t = 0; t < T; ++t) acc[t] += wk * x[(t0 + t) * w.cols + k];
    }
  }
  for (int t = 0; t < T; ++t) out[(t0 + t) * w.rows + r] = acc[t] + (bias ? bias[r] : 0.0f);
}

template <int T>
void rows_times_x(const Fp8WeightView& w, int64_t r, const float* x, int64_t t0, const float* bias,
                  float* out) {
  row_times_x<T>(w, r, x, t0, bias, out);
  row_times_x<T>(w, r + 1, x, t0, bias, out);
}

#endif

using RowFn = void (*)(const Fp8WeightView&, int64_t, const float*, int64_t, const float*, float*);
constexpr RowFn kRowFns[kTokens] = {row_times_x<1>, row_times_x<2>, row_times_x<3>, row_times_x<4>,
                                    row_times_x<5>, row_times_x<6>, row_times_x<7>, row_times_x<8>};
constexpr RowFn kRowPairFns[kTokens] = {rows_times_x<1>, rows_times_x<2>, rows_times_x<3>,
                                        rows_times_x<4>, rows_times_x<5>, rows_times_x<6>,
                                        rows_times_x<7>, rows_times_x<8>};

}  // namespace

const float* e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = e4m3_to_f32(uint8_t(i));
    return t;
  }();
  return table.data();
}

void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                float* out, const MatmulOptions& opt) {
  const bool grid_ok = w.block_n > 0 && w.block_k > 0 && w.row_offset >= 0 &&
                       w.row_offset < w.block_n && w.col_offset >= 0 && w.col_offset < w.block_k &&
                       w.scale_rows * w.block_n >= w.rows + w.row_offset &&
                       w.scale_cols * w.block_k >= w.cols + w.col_offset;
  if (!w.q || !w.scales || !grid_ok)
    raise(Err::Internal, "fp8 matmul weight of " + std::to_string(w.rows) + "x" +
                             std::to_string(w.cols) + " with " + std::to_string(w.scale_rows) +
                             "x" + std::to_string(w.scale_cols) + " scales of blocks " +
                             std::to_string(w.block_n) + "x" + std::to_string(w.block_k) +
                             " does not describe its block grid");
  if (bias && (!is_float_weight(bias->dtype) || bias->rows * bias->cols != w.rows))
    raise(Err::TensorShapeMismatch,
          "fp8 matmul bias has " + std::to_string(bias->rows * bias->cols) +
              " elements for a weight with " + std::to_string(w.rows) + " output rows");
  if (n <= 0 || w.rows == 0) return;
  if (n <= kGemvMaxRows)
    matmul_fp8_gemv(x, n, w, bias, out, opt);
  else
    matmul_fp8_blocked(x, n, w, bias, out, opt);
}

void matmul_fp8_gemv(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                     float* out, const MatmulOptions& opt) {
  const int nt = threads_for(opt.threads, w.rows * w.cols, kGrain);
  const AlignedArray<float> b = widen(bias);
  const int64_t pairs = w.rows / 2;
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static) nowait
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t t0 = 0; t0 < n; t0 += kTokens)
        kRowPairFns[std::min<int64_t>(kTokens, n - t0) - 1](w, 2 * p, x, t0, b.get(), out);
#pragma omp single nowait
    if (w.rows % 2)
      for (int64_t t0 = 0; t0 < n; t0 += kTokens)
        kRowFns[std::min<int64_t>(kTokens, n - t0) - 1](w, w.rows - 1, x, t0, b.get(), out);
  }
}

void matmul_fp8_reference(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                          float* out) {
  const AlignedArray<float> b = widen(bias);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < w.cols; ++c)
        s += double(e4m3_to_f32(w.q[r * w.cols + c])) * double(fp8_scale(w, r, c)) *
             double(x[i * w.cols + c]);
      out[i * w.rows + r] = float(s + (b ? b[r] : 0.0f));
    }
}

}  // namespace qmpi::cpu
