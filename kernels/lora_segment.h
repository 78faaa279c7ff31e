// One LoRA adapter's rows of a step on one projection, as the fused low-rank op takes them
// (Backend::lora_delta, kernels/cpu/lora_delta.h). Declared with the kernel views so that the
// CPU kernel takes the same struct the Backend seam does.
#pragma once
#include <cstdint>

#include "kernels/kernel_types.h"

namespace qmpi {

// out[rows[i], :] += scale * B (A x[rows[i], :]) for i < count, out [n, B's rows]. The segments
// of one call share x: one adapter each on one projection, or several projections of the same
// input (q/k/v, gate/up), each writing its own output.
struct LoraSegment {
  WeightView a;                   // lora_A [r, in]
  WeightView b;                   // lora_B [out, r]
  float scale = 0.0f;             // lora_alpha / r (or / sqrt(r) with rslora)
  const int32_t* rows = nullptr;  // host: the step's rows that run this adapter, distinct
  int64_t count = 0;
  float* out = nullptr;  // the projection's output, backend memory
};

}  // namespace qmpi
