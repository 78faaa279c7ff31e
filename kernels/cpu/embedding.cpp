#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

// out[i] = row ids[i] - row_offset of a table of `rows` rows, written by decode_row(r, out_row),
// where that row is in the table, else zeros.
template <class DecodeRow>
void look_up(const int32_t* ids, int64_t n, int64_t rows, int64_t width, int64_t row_offset,
             float* out, int threads, const DecodeRow& decode_row) {
  const int nt = threads_for(threads, n * width, 1 << 16);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = int64_t(ids[i]) - row_offset;
    float* o = out + i * width;
    if (r < 0 || r >= rows)
      std::fill(o, o + width, 0.0f);
    else
      decode_row(r, o);
  }
}

}  // namespace

void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
               float* out, int threads) {
  const size_t row_bytes = size_t(table.cols) * dtype_size(table.dtype);
  look_up(ids, n, table.rows, table.cols, row_offset, out, threads, [&](int64_t r, float* o) {
    convert_to_f32(static_cast<const char*>(table.data) + size_t(r) * row_bytes, table.dtype,
                   table.cols, o);
  });
}

void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table, int64_t row_offset,
                    float* out, int threads) {
  look_up(ids, n, table.rows, table.cols, row_offset, out, threads, [&](int64_t r, float* o) {
    dequantize_ggml_row(table.type, table.data + r * table.row_bytes, o, table.cols);
  });
}

void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width, float* dst) {
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + i * width, src + int64_t(rows[i]) * width, size_t(width) * sizeof(float));
}

void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                      int64_t width, float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    float* d = dst + int64_t(rows[i]) * width;
    const float* s = src + i * width;
    const float w = scales[i];
    for (int64_t c = 0; c < width; ++c) d[c] += w * s[c];
  }
}

}  // namespace qmpi::cpu
