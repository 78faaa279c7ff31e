// Addressing an int4 weight's arrays in either Int4Layout (kernels/kernel_types.h), and the
// host-side copy from the row-major order the loader builds into the layout a backend reads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernel_types.h"

namespace qmpi {

inline constexpr int64_t kInt4Block = 16;  // rows per block of Int4Layout::Blocks16

// Rows in the Blocks16 block that starts at row r0.
inline int64_t int4_block_width(int64_t rows, int64_t r0) {
  return std::min(kInt4Block, rows - r0);
}

// Offset of element (r, c) of a [rows, cols] array.
inline int64_t int4_offset(Int4Layout layout, int64_t rows, int64_t cols, int64_t r, int64_t c) {
  if (layout == Int4Layout::Rows) return r * cols + c;
  const int64_t r0 = r - r % kInt4Block;
  return r0 * cols + c * int4_block_width(rows, r0) + (r - r0);
}

// Packed input k of the activation row xi: through x_index (act-order, -1 for padding) where the
// weight has one, else xi[k]; 0 for padding and past in_features.
inline float int4_packed_input(const Int4WeightView& w, const float* xi, int64_t k) {
  if (w.x_index) return w.x_index[k] < 0 ? 0.0f : xi[w.x_index[k]];
  return k < w.in_features ? xi[k] : 0.0f;
}

// A row-major [rows, cols] array in `to`'s order.
template <class T>
std::vector<T> int4_relayout(const std::vector<T>& rows_major, int64_t rows, int64_t cols,
                             Int4Layout to) {
  if (to == Int4Layout::Rows) return rows_major;
  std::vector<T> out(rows_major.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(int4_offset(to, rows, cols, r, c))] = rows_major[size_t(r * cols + c)];
  return out;
}

}  // namespace qmpi
