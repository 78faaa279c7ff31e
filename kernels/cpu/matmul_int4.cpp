#include "kernels/cpu/matmul_int4.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/int4_layout.h"

namespace qmpi::cpu {

void dequantize_int4_word(const Int4WeightView& w, int64_t r, int64_t v, int64_t g, float* d,
                          int64_t stride) {
  const int64_t e = int4_offset(w.layout, w.rows, w.groups, r, g);
  const float s = half_to_f32(w.scales[e]), z = float(w.zeros[e]);
  const uint32_t q = w.qweight[int4_offset(w.layout, w.rows, w.words, r, v)];
  for (int j = 0; j < 8; ++j) d[j * stride] = (float((q >> (4 * j)) & 15u) - z) * s;
}

void dequantize_int4_rows(const Int4WeightView& w, int64_t r0, int64_t r1, float* dst) {
  const int64_t kp = w.words * 8;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t g = 0; g < w.groups; ++g)
      for (int64_t i = w.group_words[g]; i < w.group_words[g + 1]; ++i)
        dequantize_int4_word(w, r, i, g, dst + (r - r0) * kp + i * 8, 1);
}

void gather_int4_input(const float* x, int64_t n, const Int4WeightView& w, float* dst) {
  const int64_t kp = w.words * 8, K = w.in_features;
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * K;
    float* d = dst + i * kp;
    if (!w.x_index) {
      std::copy(xi, xi + K, d);
      std::fill(d + K, d + kp, 0.0f);
      continue;
    }
    for (int64_t k = 0; k < kp; ++k) d[k] = int4_packed_input(w, xi, k);
  }
}

const float* packed_int4_input(const float* x, int64_t n, const Int4WeightView& w,
                               AlignedArray<float>& storage) {
  if (!w.x_index && w.words * 8 == w.in_features) return x;
  storage = make_aligned<float>(size_t(n * w.words * 8));
  gather_int4_input(x, n, w, storage.get());
  return storage.get();
}

namespace {

void check(const Int4WeightView& w, const WeightView* bias) {
  if (!w.qweight || !w.scales || !w.zeros || !w.group_words || w.groups < 1 ||
      (!w.x_index && w.words * 8 != w.in_features) || w.words * 8 < w.in_features)
    raise(Err::Internal, "int4 matmul weight of " + std::to_string(w.rows) + " rows, " +
                             std::to_string(w.words) + " words, " + std::to_string(w.groups) +
                             " groups does not describe " + std::to_string(w.in_features) +
                             " inputs");
  if (w.layout != Int4Layout::Blocks16)
    raise(Err::Internal, "the CPU int4 matmul reads Blocks16 weights (kernels/kernel_types.h)");
  if (bias && (!is_float_weight(bias->dtype) || bias->rows * bias->cols != w.rows))
    raise(Err::TensorShapeMismatch,
          "int4 matmul bias has " + std::to_string(bias->rows * bias->cols) +
              " elements for a weight with " + std::to_string(w.rows) + " output rows");
}

// Whether two weights read x alike: the same packed inputs in the same order, cut into the same
// groups (AWQ's projections of one input; GPTQ act-order ones each have their own order).
bool alike(const Int4WeightView& a, const Int4WeightView& b) {
  return a.in_features == b.in_features && a.words == b.words && a.groups == b.groups &&
         a.x_index == b.x_index &&
         std::equal(a.group_words, a.group_words + a.groups + 1, b.group_words);
}

// The path that suits n for checked targets that read x alike: with bf16 activations the int16
// GEMV or the bf16 tiles take them all in one call, else the float paths one by one.
void run(const float* x, int64_t n, std::span<const Int4Target> targets, const MatmulOptions& opt) {
  if (opt.bf16_activations && n > kInt4GemvMaxRowsBf16 &&
      matmul_int4_blocked_bf16(x, n, targets, opt))
    return;
  if (opt.bf16_activations && n <= kInt4GemvInt16MaxRows &&
      matmul_int4_gemv_int16(x, n, targets, opt))
    return;
  for (const Int4Target& t : targets) {
    if (t.w.rows == 0) continue;
    if (n <= kInt4GemvMaxRows)
      matmul_int4_gemv(x, n, t.w, t.bias, t.out, opt);
    else
      matmul_int4_blocked(x, n, t.w, t.bias, t.out, opt);
  }
}

}  // namespace

void matmul_int4(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                 float* out, const MatmulOptions& opt) {
  const Int4Target t{w, bias, out};
  matmul_int4_group(x, n, {&t, 1}, opt);
}

void matmul_int4_group(const float* x, int64_t n, std::span<const Int4Target> targets,
                       const MatmulOptions& opt) {
  bool same = true;
  int64_t rows = 0;
  for (const Int4Target& t : targets) {
    check(t.w, t.bias);
    same = same && alike(t.w, targets[0].w);
    rows += t.w.rows;
  }
  if (n <= 0 || rows == 0) return;
  if (same) return run(x, n, targets, opt);
  for (const Int4Target& t : targets)
    if (t.w.rows > 0) run(x, n, {&t, 1}, opt);
}

void matmul_int4_reference(const float* x, int64_t n, const Int4WeightView& w,
                           const WeightView* bias, float* out) {
  const int64_t kp = w.words * 8;
  AlignedArray<float> xg = make_aligned<float>(size_t(n * kp));
  gather_int4_input(x, n, w, xg.get());
  AlignedArray<float> b = widen(bias);
  AlignedArray<float> row = make_aligned<float>(size_t(kp));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_int4_rows(w, r, r + 1, row.get());
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int64_t k = 0; k < kp; ++k) s += double(row[k]) * double(xg[i * kp + k]);
      out[i * w.rows + r] = float(s + (b ? b[r] : 0.0f));
    }
  }
}

}  // namespace qmpi::cpu
