// The GGUF matmul's checks, reference and plain path. The plain path gives each thread a
// contiguous run of weight rows; for each row it decodes a block into a buffer on the stack and
// adds its dot product with every row of x into out, so each block is decoded once per call.
#include "kernels/cpu/matmul_ggml.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ggml_matmul_check.h"

namespace qmpi::cpu {
namespace {

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;

}  // namespace

void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                 float* out, const MatmulOptions& opt) {
  const GgmlTypeInfo& t = check_ggml_matmul(w, bias);
  if (n <= 0 || w.rows == 0) return;
  // Plain floats in whole rows are a dense weight: the float kernels serve them.
  if (const std::optional<WeightView> dense = ggml_as_dense(w, t))
    return matmul(x, n, *dense, bias, out, opt);
  if (n <= kGemvMaxRows) {
    if (opt.bf16_activations && matmul_ggml_gemv_int8(x, n, w, bias, out, opt)) return;
    matmul_ggml_gemv(x, n, w, bias, out, opt);
  } else if (!opt.bf16_activations || !matmul_ggml_blocked_bf16(x, n, w, bias, out, opt))
    matmul_ggml_blocked(x, n, w, bias, out, opt);
}

void matmul_ggml_plain(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                       float* out, const MatmulOptions& opt) {
  const GgmlTypeInfo& t = *ggml_type_info(uint32_t(w.type));
  // Plain floats decode kGgmlMaxBlockElems at a time, like one k-quant block.
  const int64_t be = t.block_elems == 1 ? kGgmlMaxBlockElems : t.block_elems;
  const int64_t bb = ggml_bytes(t, be);
  const AlignedArray<float> b = widen(bias);
  const int nt = threads_for(opt.threads, w.rows * w.cols, kGrain);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < w.rows; ++r) {
    alignas(64) float buf[kGgmlMaxBlockElems];
    for (int64_t i = 0; i < n; ++i) out[i * w.rows + r] = b ? b[r] : 0.0f;
    const uint8_t* row = w.data + r * w.row_bytes;
    for (int64_t c = 0; c < w.cols; c += be) {
      const int64_t len = std::min(be, w.cols - c);
      dequantize_ggml_row(w.type, row + c / be * bb, buf, len);
      for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * w.cols + c;
        // 16 partial sums: a shape the compiler turns into one vector FMA chain.
        float s[16] = {};
        for (int64_t k = 0; k < len; ++k) s[k % 16] += buf[k] * xi[k];
        float sum = 0.0f;
        for (float p : s) sum += p;
        out[i * w.rows + r] += sum;
      }
    }
  }
}

void matmul_ggml_reference(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out) {
  const GgmlTypeInfo& t = *ggml_type_info(uint32_t(w.type));
  const AlignedArray<float> b = widen(bias);
  float buf[kGgmlMaxBlockElems];
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t r = 0; r < w.rows; ++r) {
    std::fill(s.begin(), s.end(), 0.0);
    for (int64_t blk = 0; blk < w.cols / t.block_elems; ++blk) {
      dequantize_ggml_block(w.type, w.data + r * w.row_bytes + blk * t.block_bytes, buf);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < t.block_elems; ++k)
          s[size_t(i)] += double(buf[k]) * double(x[i * w.cols + blk * t.block_elems + k]);
    }
    for (int64_t i = 0; i < n; ++i) out[i * w.rows + r] = float(s[size_t(i)] + (b ? b[r] : 0.0f));
  }
}

}  // namespace qmpi::cpu
