// Activations as they cross the Backend seam with their type: a view (pointer, dtype, shape) and
// the GEMM input, float32 rows plus an optional copy in the dtype the backend's GEMM reads.
//
// Why a copy travels with x: a backend whose GEMMs multiply in 16 bits (CUDA's tensor cores,
// Backend::gemm_input_dtype) would otherwise round x to bf16 in front of every GEMM, one more
// pass over x. The op that writes a GEMM's input (rmsnorm, add_rmsnorm, silu_mul) can write
// that rounding as it writes x, into a view the model owns and passes; the model then hands the
// pair to the GEMM. The copy is valid because the model says so at the call, for the x it pairs
// it with: no backend state tracks which array a copy belongs to.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace qmpi {

// rows x cols elements of dtype, row-major, in backend memory. Empty (data null): none.
struct ActivationView {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;

  explicit operator bool() const { return data != nullptr; }
  // Rows [begin, begin + count) of this view (empty stays empty).
  ActivationView rows_from(int64_t begin, int64_t count) const {
    if (!data) return {};
    return {static_cast<char*>(data) + size_t(begin * cols) * dtype_size(dtype), dtype, count,
            cols};
  }
};

// A GEMM's input x[n, in_features] in float32 and, when the model has one, `rounded`: the same
// rows in the dtype the backend's GEMM reads, written by the op that wrote x and not changed
// since. A backend multiplies `rounded` when its dtype is the weight's and converts x otherwise,
// so the float32 rows are always there (LoRA, dumps and other weights read them).
struct GemmInput {
  // Float32 rows alone: what every caller that has no copy passes.
  GemmInput(const float* f32) : x(f32) {}  // NOLINT(google-explicit-constructor)
  GemmInput(const float* f32, const ActivationView& copy) : x(f32), rounded(copy) {}

  const float* x = nullptr;
  ActivationView rounded;
};

// Raises Err::Internal unless `v` is empty or holds rows x cols of `dtype`: what an op checks of
// a rounded copy before it writes or reads one (`op` names it in the message).
void check_rounded(const ActivationView& v, DType dtype, int64_t rows, int64_t cols,
                   const char* op);

}  // namespace qmpi
