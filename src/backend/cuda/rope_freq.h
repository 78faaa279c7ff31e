// RoPE's inverse frequencies, as Hugging Face computes them in float32 (and kernels/cpu/rope.cpp
// does): inv_freq[m] = 1 / theta^(2m / head_dim), so both backends turn by the same angles.
#pragma once
#include <cstdint>
#include <vector>

namespace qmpi::cuda {

std::vector<float> rope_inv_freq(double theta, int32_t head_dim);

}  // namespace qmpi::cuda
