// Row lookups: the (vocab-parallel) embedding, gathering activation rows by index and the
// weighted scatter-add that returns them (MoE experts).
#pragma once
#include <cstdint>

#include "core/ggml_types.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// out[i] = table[ids[i] - row_offset] widened to float32 when that row is in this rank's slice
// of the vocabulary, else zeros (the TP all-reduce then sums the slices into full rows).
void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
               float* out, int threads);
// The same for a GGUF table in its blocks, each looked-up row decoded (dequantize_ggml_row).
void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table, int64_t row_offset,
                    float* out, int threads);
// dst[i] = src[rows[i]] for rows of `width` floats.
void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width, float* dst);
// dst[rows[i]] += scales[i] * src[i] for rows of `width` floats.
void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                      int64_t width, float* dst);

}  // namespace qmpi::cpu
