// Plain reference versions of every CPU op: simple loops with double accumulation, written to
// be obviously right rather than fast. The optimized kernels are tested against these.
#pragma once
#include <cstdint>

#include "kernels/kernel_types.h"

namespace qmpi::cpu::ref {

void matmul(const float* x, int64_t n, const WeightView& w, const WeightView* bias, float* out);
void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out);
// Angles in float32 as Hugging Face computes them from f's inverse frequencies (one row, or
// one per token); cos and sin times f.attention; the rotation in double.
void rope(float* x, int64_t n, int32_t heads, const int32_t* positions, const RopeFreqs& f);
void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out);
void add(float* x, const float* y, int64_t count);
void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
               float* out);
void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width, float* dst);
void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                      int64_t width, float* dst);
void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
              const KvLayerView& kv);
void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv, float* out);
double log_sum_exp(const float* x, int64_t n);

}  // namespace qmpi::cpu::ref
