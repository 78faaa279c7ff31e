// The LoRA deltas of a step in one op (a segmented low-rank GEMM) for one projection, or for the
// projections that read the same x (q/k/v, gate/up): for each segment (one adapter's rows on
// one projection), low = scale * x[rows] . A^T with each A row read once for all the segment's
// rows, then out[rows] += low . B^T with each B row read once, added into the projection's
// output in place. No gathered copy of x, no delta rows, one OpenMP region per call: A's rows
// are split over the threads, then (after a barrier) B's output rows. float32 accumulation over
// A and B in BF16, F16 or F32 and float32 x, so with float32 adapters the result is the plain
// float32 sum (the exact-math path).
#pragma once
#include <cstdint>
#include <span>

#include "kernels/lora_segment.h"

namespace qmpi::cpu {

// x [n, in]: every segment's A is [r, in] and B [out, r], its out [n, out] (r and out may differ
// between segments; segments that share an out must not share rows). Raises TensorShapeMismatch
// when the shapes disagree or a row is outside [0, n), DTypeUnsupported for weights other than
// BF16, F16 or F32. `threads` as MatmulOptions.
void lora_delta(const float* x, int64_t n, std::span<const LoraSegment> segments, int threads);

}  // namespace qmpi::cpu
