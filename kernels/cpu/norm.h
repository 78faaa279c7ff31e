// RMSNorm over rows of float32 activations.
#pragma once
#include <cstdint>

#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// out = x * rsqrt(mean(x^2) + eps) * w per row of width w.cols; float32 accumulation as in
// Hugging Face. out may alias x.
void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out, int threads);

}  // namespace qmpi::cpu
