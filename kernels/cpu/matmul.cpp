#include "kernels/cpu/matmul.h"

#include <string>

#include "core/errors.h"

namespace qmpi::cpu {
namespace {

void check(const WeightView& w, const WeightView* bias) {
  if (!is_float_weight(w.dtype))
    raise(Err::DTypeUnsupported, "matmul weight [" + std::to_string(w.rows) + ", " +
                                     std::to_string(w.cols) + "] has dtype " +
                                     std::string(dtype_name(w.dtype)) +
                                     "; the CPU backend multiplies F32, F16 or BF16 weights");
  if (bias && (!is_float_weight(bias->dtype) || bias->rows * bias->cols != w.rows))
    raise(Err::TensorShapeMismatch, "matmul bias has " + std::to_string(bias->rows * bias->cols) +
                                        " elements of " + std::string(dtype_name(bias->dtype)) +
                                        " for a weight with " + std::to_string(w.rows) +
                                        " output rows");
}

bool uses_gemv(int64_t n, DType wt, const MatmulOptions& opt) {
#if defined(__AVX512BF16__)
  const bool bf16_dot = opt.bf16_activations && wt == DType::BF16;
#else
  const bool bf16_dot = false;
  (void)wt;
  (void)opt;
#endif
  return n <= (bf16_dot ? kGemvMaxRowsBf16 : kGemvMaxRows);
}

void run(const float* x, int64_t n, std::span<const MatmulTarget> targets,
         const MatmulOptions& opt) {
  if (uses_gemv(n, targets[0].w.dtype, opt))
    matmul_gemv(x, n, targets, opt);
  else
    matmul_blocked(x, n, targets, opt);
}

}  // namespace

void matmul(const float* x, int64_t n, const WeightView& w, const WeightView* bias, float* out,
            const MatmulOptions& opt) {
  check(w, bias);
  if (n <= 0 || w.rows == 0) return;
  const MatmulTarget t{w, bias, out};
  run(x, n, {&t, 1}, opt);
}

void matmul_group(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                  const MatmulOptions& opt) {
  bool alike = true;
  for (const MatmulTarget& t : targets) {
    check(t.w, t.bias);
    alike = alike && t.w.dtype == targets[0].w.dtype && t.w.cols == targets[0].w.cols;
  }
  if (n <= 0 || targets.empty()) return;
  if (alike) return run(x, n, targets, opt);
  for (const MatmulTarget& t : targets) matmul(x, n, t.w, t.bias, t.out, opt);
}

}  // namespace qmpi::cpu
