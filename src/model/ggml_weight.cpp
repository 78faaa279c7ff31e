#include "model/ggml_weight.h"

#include <algorithm>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/ggml_dequant.h"

namespace qmpi {
namespace {

// [rows, cols] of a matrix, [1, cols] of a vector.
void matrix_shape(const TensorInfo& info, int64_t& rows, int64_t& cols) {
  if (info.shape.size() == 1) {
    rows = 1;
    cols = info.shape[0];
  } else if (info.shape.size() == 2) {
    rows = info.shape[0];
    cols = info.shape[1];
  } else {
    raise(Err::Internal, "tensor " + info.name + " is not a matrix");
  }
}

}  // namespace

bool slice_keeps_blocks(const TensorInfo& info, const Slice& slice) {
  if (slice.length < 0 || size_t(slice.dim) + 1 < info.shape.size()) return true;
  const int64_t blk = info.ggml->block_elems, end = slice.start + slice.length;
  return slice.start % blk == 0 && (end % blk == 0 || end == info.shape.back());
}

GgmlWeight read_ggml_weight(WeightSource& src, Backend& be, const std::string& name,
                            const Slice& slice) {
  const TensorInfo& info = src.info(name);
  int64_t rows = 0, cols = 0;
  matrix_shape(info, rows, cols);
  if (slice.length >= 0) (slice.dim == 0 && info.shape.size() == 2 ? rows : cols) = slice.length;
  GgmlWeight w;
  w.type = info.ggml->type;
  w.cols = cols;
  w.q = be.make_weight(DType::U8, rows, ggml_bytes(*info.ggml, cols),
                       [&](void* dst) { src.read(name, slice, dst); });
  return w;
}

Weight read_ggml_dequantized(WeightSource& src, Backend& be, const std::string& name,
                             const Slice& slice) {
  const TensorInfo& info = src.info(name);
  const GgmlTypeInfo& t = *info.ggml;
  int64_t rows = 0, cols = 0;
  matrix_shape(info, rows, cols);
  // The whole blocks that cover the slice's columns; rows as the slice says.
  Slice covering = slice;
  int64_t first_col = 0, ncols = cols;
  const bool col_slice = slice.length >= 0 && size_t(slice.dim) + 1 == info.shape.size();
  if (col_slice) {
    first_col = slice.start;
    ncols = slice.length;
    const int64_t b0 = slice.start / t.block_elems * t.block_elems;
    const int64_t b1 = std::min(
        cols, (slice.start + slice.length + t.block_elems - 1) / t.block_elems * t.block_elems);
    covering = Slice{slice.dim, b0, b1 - b0};
    first_col -= b0;
  } else if (slice.length >= 0) {
    rows = slice.length;
  }
  const int64_t span = col_slice ? covering.length : cols;
  const int64_t span_bytes = ggml_bytes(t, span);
  std::vector<uint8_t> blocks(size_t(rows * span_bytes));
  src.read(name, covering, blocks.data());
  return be.make_weight(DType::F32, info.shape.size() == 1 ? 1 : rows, ncols, [&](void* dst) {
    std::vector<float> row(static_cast<size_t>(span));
    auto* out = static_cast<float*>(dst);
    for (int64_t r = 0; r < rows; ++r) {
      cpu::dequantize_ggml_row(t.type, blocks.data() + r * span_bytes, row.data(), span);
      std::copy_n(row.data() + first_col, ncols, out + r * ncols);
    }
  });
}

}  // namespace qmpi
