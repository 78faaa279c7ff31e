// A GGUF projection as a rank holds it: this rank's rows (column-parallel) or whole blocks of
// inputs (row-parallel) of a block-quantized matrix, byte for byte as the file stores them, for
// Backend::matmul_ggml to decode inside its tiles. And the fallback for a slice that would cut a
// block (an o_proj whose head split lands inside a 256-element k-quant block, say): this rank's
// columns decoded to float32 once at load, a dense Weight like any float checkpoint's.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/ggml_types.h"
#include "io/weight_source.h"

namespace qmpi {

struct GgmlWeight {
  Weight q;  // U8 [rows, row_bytes]: the blocks
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;  // input features

  GgmlWeightView view() const {
    return {static_cast<const uint8_t*>(q.storage.data()), type, q.rows, cols, q.cols};
  }
  int64_t rows() const { return q.rows; }
  uint64_t bytes() const { return q.storage.bytes(); }
  explicit operator bool() const { return static_cast<bool>(q); }
};

// True when `slice` of the block-quantized tensor `info` ([rows, cols]) keeps whole blocks:
// any row slice, a column slice starting and ending on block edges (or at the last column).
bool slice_keeps_blocks(const TensorInfo& info, const Slice& slice);

// Reads `slice` of the block-quantized matrix `name` (slice_keeps_blocks) into backend memory.
GgmlWeight read_ggml_weight(WeightSource& src, Backend& be, const std::string& name,
                            const Slice& slice);

// Reads `slice` of the block-quantized tensor `name` ([rows, cols], or [cols]) and decodes it to a
// float32 Weight of the slice's shape, reading only the blocks that hold the slice's columns.
Weight read_ggml_dequantized(WeightSource& src, Backend& be, const std::string& name,
                             const Slice& slice);

}  // namespace qmpi
