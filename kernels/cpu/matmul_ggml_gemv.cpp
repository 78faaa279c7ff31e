// The GGUF decode GEMV: each thread takes a contiguous run of weight rows; a row's blocks are
// decoded 16 weights at a time in registers (ggml_simd.h) and used there by up to kTokens rows of
// x, so each weight byte is read once per kTokens tokens and no weight is ever stored as a float.
// Consecutive chunks feed two accumulator sets, so a single token still has two independent FMA
// chains.
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_simd.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

#if defined(QMPI_GGML_SIMD)

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;
// Rows of x one pass over a weight row serves: 2 x 8 accumulator chunks of AVX-512's 32
// registers, 2 x 3 (of two registers each) of AVX2's 16.
#if defined(__AVX512F__)
constexpr int kTokens = 8;
#else
constexpr int kTokens = 3;
#endif

template <class D, int T>
void row_times_x(const GgmlWeightView& w, int64_t r, const float* x, int64_t t0, const float* bias,
                 float* out) {
  using namespace ggml_simd;
  Chunk acc[2][T];
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = zero();
  const uint8_t* row = w.data + r * w.row_bytes;
  const float* x0 = x + t0 * w.cols;
  for (int64_t blk = 0; blk < w.cols / D::kElems; ++blk) {
    const float* xb = x0 + blk * D::kElems;
    D::block(row + blk * D::kBytes, [&](int c, Chunk wv) {
      for (int t = 0; t < T; ++t)
        acc[c & 1][t] = fma_x(wv, xb + t * w.cols + 16 * c, acc[c & 1][t]);
    });
  }
  for (int t = 0; t < T; ++t)
    out[(t0 + t) * w.rows + r] = sum(add(acc[0][t], acc[1][t])) + (bias ? bias[r] : 0.0f);
}

// row_times_x<D, T> for T in 1..kTokens, by T - 1.
template <class D, int... I>
constexpr auto row_fns(std::integer_sequence<int, I...>) {
  using RowFn =
      void (*)(const GgmlWeightView&, int64_t, const float*, int64_t, const float*, float*);
  return std::array<RowFn, kTokens>{row_times_x<D, I + 1>...};
}

template <class D>
void gemv(const float* x, int64_t n, const GgmlWeightView& w, const float* bias, float* out,
          int threads) {
  constexpr auto kFns = row_fns<D>(std::make_integer_sequence<int, kTokens>{});
  const int nt = threads_for(threads, w.rows * w.cols, kGrain);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t t0 = 0; t0 < n; t0 += kTokens)
      kFns[std::min<int64_t>(kTokens, n - t0) - 1](w, r, x, t0, bias, out);
}

#endif

}  // namespace

void matmul_ggml_gemv(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt) {
#if defined(QMPI_GGML_SIMD)
  const AlignedArray<float> b = widen(bias);
  if (ggml_simd::with_decoder(
          w.type, [&](auto d) { gemv<decltype(d)>(x, n, w, b.get(), out, opt.threads); }))
    return;
#endif
  matmul_ggml_plain(x, n, w, bias, out, opt);
}

}  // namespace qmpi::cpu
