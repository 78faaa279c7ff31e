// Element-wise ops of the Qwen block: the SwiGLU gate and the residual add.
#pragma once
#include <cstdint>

namespace qmpi::cpu {

// out[i] = silu(gate[i]) * up[i] over n * width elements; out may alias gate or up.
void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
              int threads);
// x += y over count elements.
void add(float* x, const float* y, int64_t count, int threads);

}  // namespace qmpi::cpu
