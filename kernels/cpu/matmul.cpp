#include "kernels/cpu/matmul.h"

#include <string>

#include "core/errors.h"

namespace qmpi::cpu {

void matmul(const float* x, int64_t n, const WeightView& w, const WeightView* bias, float* out,
            const MatmulOptions& opt) {
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
  if (n <= 0 || w.rows == 0) return;
#if defined(__AVX512BF16__)
  const bool bf16_dot = opt.bf16_activations && w.dtype == DType::BF16;
#else
  const bool bf16_dot = false;
#endif
  if (n <= (bf16_dot ? kGemvMaxRowsBf16 : kGemvMaxRows))
    matmul_gemv(x, n, w, bias, out, opt);
  else
    matmul_blocked(x, n, w, bias, out, opt);
}

}  // namespace qmpi::cpu
