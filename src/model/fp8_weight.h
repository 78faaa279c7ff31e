// A block-wise FP8 projection (Qwen's -FP8 checkpoints: e4m3 `.weight` [out, in] and float32
// `.weight_scale_inv` per weight_block_size block) as a rank holds it, and the reader that loads
// this rank's slice of one: the e4m3 bytes of its rows (column-parallel) or inputs
// (row-parallel) and the scale rows or columns of the blocks those touch, nothing else.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "io/weight_source.h"
#include "model/config.h"

namespace qmpi {

struct Fp8Weight {
  Weight q;       // U8 [rows, cols]: e4m3 codes
  Weight scales;  // F32 [scale_rows, scale_cols]
  int64_t block_n = 0, block_k = 0, row_offset = 0, col_offset = 0;

  Fp8WeightView view() const;
  int64_t rows() const { return q.rows; }
  int64_t cols() const { return q.cols; }
  uint64_t bytes() const { return q.storage.bytes() + scales.storage.bytes(); }
  explicit operator bool() const { return static_cast<bool>(q); }
};

// The scale_inv tensor of the projection whose weight is `weight_name`.
std::string fp8_scale_name(const std::string& weight_name);

// Reads prefix.weight and prefix.weight_scale_inv, full shapes [out_features, in_features] and
// [ceil(out / block_n), ceil(in / block_k)], sliced per `slice` (the shard plan's slice of
// prefix.weight), into backend memory. Throws Error(QuantTensorInvalid) when a dtype or shape
// disagrees with the config, a weight byte is an e4m3 NaN or a scale is not a positive finite
// number; TensorMissing when a tensor is absent.
Fp8Weight read_fp8_linear(const ModelConfig& cfg, WeightSource& src, Backend& be,
                          const std::string& prefix, int64_t out_features, int64_t in_features,
                          const Slice& slice);

}  // namespace qmpi
