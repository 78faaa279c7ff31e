// A quantized weight as the blocked GEMM's bf16 tiles take it (matmul_blocked.cpp): a few rows at
// a time decoded to exact bf16 values, and a float scale per row and block of inputs that the
// tiles apply to their partial sums. FP8 (matmul_fp8_blocked.cpp) and int4
// (matmul_int4_bf16.cpp) describe themselves this way, so both run the one GEMM.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

struct ScaledRows {
  int64_t rows = 0;
  int64_t cols = 0;  // K: inputs as the tiles see them (x has this many columns)
  int64_t blocks = 1;
  // Where the weight's row r starts, approximately, for prefetching: bytes + r * row_bytes.
  const char* bytes = nullptr;
  int64_t row_bytes = 0;

  virtual ~ScaledRows() = default;
  // Inputs [block_start(b), block_start(b + 1)) share a scale; block_start(0) = 0,
  // block_start(blocks) = cols, every start even (a bf16 pair never straddles two scales).
  // A block may be empty.
  virtual int64_t block_start(int64_t b) const = 0;
  // Rows [r0, r0 + mr) as bf16 bits at rows[i * ld + k], and scales[b * stride + i] for row
  // r0 + i and block b, such that the row's weights are the bf16 values times their scale.
  virtual void decode(int64_t r0, int mr, int64_t ld, uint16_t* rows, float* scales,
                      int64_t stride) const = 0;
};

#if defined(__AVX512BF16__)
// The bf16 bits of the integers first, first + 1, ..., first + 31 (exact in bf16): the table
// that the decoders look small quants up in by VPERMW to write the tiles' rows.
inline __m512i bf16_int_words(int first) {
  alignas(64) uint16_t v[32];
  for (int i = 0; i < 32; ++i) v[i] = f32_to_bf16(float(first + i));
  return _mm512_load_si512(v);
}
#endif

// One projection of a group that shares its input, as MatmulTarget is for float weights.
struct ScaledTarget {
  const ScaledRows* w;
  const WeightView* bias;
  float* out;
};

// out[n, w.rows] = x[n, w.cols] . W^T (+ bias) for every target (all of the same width; x packed
// once for them, their rows shared out together), x rounded to bf16: on the bf16 tiles, or where
// the CPU has no VDPBF16PS on the float32 tiles with the decoded rows widened (the same numbers).
void matmul_blocked_scaled(const float* x, int64_t n, std::span<const ScaledTarget> targets,
                           const MatmulOptions& opt);

}  // namespace qmpi::cpu
