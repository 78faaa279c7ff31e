// The plain views every kernel takes (CPU and CUDA alike): a weight, an attention batch, one
// layer of the paged KV cache. They sit below the Backend so that kernels need no backend.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace qmpi {

// A read-only view of a weight: row-major [rows, cols] = nn.Linear's [out_features, in_features];
// 1-D tensors (norm weights, biases) are rows = 1, cols = n.
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  // Backend-specific prepared form (e.g. a packed layout); may be null.
  const void* prepared = nullptr;
};

// Where qweight, scales and zeros keep element (row, col) of their [rows, cols] (the backend
// chooses, Backend::int4_layout):
// - Rows: row-major, as the shapes below read (the CUDA kernels).
// - Blocks16: rows in blocks of 16 (the last one narrower when rows % 16 != 0), each block
//   column-major: element (16b + l, c) at 16b * cols + c * width + l, width = min(16, rows - 16b).
//   One 64-byte load then holds the same word (or group) of 16 output rows, so the CPU kernels
//   keep outputs in vector lanes and never reduce across them.
enum class Int4Layout : uint8_t { Rows, Blocks16 };

// One projection of a group that shares its input (q/k/v, gate/up; Backend::matmul_group):
// out[n, w.rows] = x[n, w.cols] . w^T (+ bias), bias may be null. Declared with the views so
// that the CPU kernels take the same struct the Backend seam does.
struct MatmulTarget {
  WeightView w;
  const WeightView* bias;
  float* out;
};

// An int4 (AWQ / GPTQ) projection as the kernels take it: the loader repacks either checkpoint
// format into this one layout, so each backend has one int4 matmul.
// - qweight [rows, words] uint32: word w of output row n holds the 4-bit values of packed
//   inputs 8w..8w+7, input 8w+j in bits 4j..4j+3 (GPTQ's order, along K instead of across it).
// - scales [rows, groups] F16 and zeros [rows, groups] uint8 (the true zero point, 0..16):
//   W[n][k] = (q - zeros[n][g]) * scales[n][g] for packed input k of group g.
// - group_words [groups + 1] int32: group g covers words [group_words[g], group_words[g + 1]).
// - x_index [words * 8] int32 or null: packed input k multiplies x[x_index[k]] (-1: nothing).
//   GPTQ act-order rows are sorted by group at load time and each group padded to whole words,
//   so groups are contiguous runs; null means packed input k is x[k].
// All arrays live in backend memory, laid out as `layout` says.
struct Int4WeightView {
  const uint32_t* qweight = nullptr;
  const uint16_t* scales = nullptr;
  const uint8_t* zeros = nullptr;
  const int32_t* group_words = nullptr;
  const int32_t* x_index = nullptr;
  int64_t rows = 0;         // output features
  int64_t words = 0;        // packed input words per row
  int64_t groups = 0;       // scale/zero groups per row
  int64_t in_features = 0;  // columns of x
  Int4Layout layout = Int4Layout::Rows;
};

// RoPE's inverse frequencies as the model computed them (model/rope_scaling.h): `rows` rows of
// head_dim / 2 floats, either one row for every token or one per token (dynamic NTK scaling),
// and the factor cos and sin are multiplied by (YaRN's attention scaling, else 1).
struct RopeFreqs {
  const float* inv_freq = nullptr;  // host
  int64_t rows = 1;
  int32_t head_dim = 0;
  float attention = 1.0f;
};

// A block-wise FP8 projection (Qwen's -FP8 checkpoints) as the kernels take it:
// - q [rows, cols] uint8, row-major: e4m3 codes (1 sign, 4 exponent bits with bias 7, 3 mantissa
//   bits; no infinities; 0x7f / 0xff are NaN, which the loader refuses).
// - scales [scale_rows, scale_cols] float32, row-major: W[r][c] = e4m3(q[r][c]) *
//   scales[(r + row_offset) / block_n][(c + col_offset) / block_k].
// The offsets place a rank's slice inside the checkpoint's block grid: a TP slice that starts
// inside a block (head_dim-wide cuts of q/k/v/o) keeps the scale rows or columns it touches and
// says where in the first block it starts. Both arrays live in backend memory.
struct Fp8WeightView {
  const uint8_t* q = nullptr;
  const float* scales = nullptr;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
  int64_t scale_rows = 0, scale_cols = 0;
  int64_t block_n = 0, block_k = 0;
  int64_t row_offset = 0, col_offset = 0;  // in [0, block_n), [0, block_k)
};

// One int4 projection of a group that shares its input (Backend::matmul_int4_group).
struct Int4Target {
  Int4WeightView w;
  const WeightView* bias;
  float* out;
};

// One FP8 projection of a group that shares its input (Backend::matmul_fp8_group), as
// MatmulTarget is for float weights.
struct Fp8Target {
  Fp8WeightView w;
  const WeightView* bias;
  float* out;
};

// One sequence of a batched attention call. Rows of q/out for this sequence are
// [q_begin, q_begin + q_len); its keys are the first ctx_len cache positions (past + new), and
// new token i sits at position ctx_len - q_len + i (causal: it sees keys 0..that position).
struct AttentionSeq {
  int32_t q_begin = 0;
  int32_t q_len = 0;
  int32_t ctx_len = 0;
  int32_t table_begin = 0;  // offset of its block table in AttentionBatch::block_tables
};

struct AttentionBatch {
  const AttentionSeq* seqs = nullptr;  // host
  int32_t num_seqs = 0;
  const int32_t* block_tables = nullptr;  // host, flat
  int32_t num_heads = 0;                  // query heads on this rank
  int32_t num_kv_heads = 0;               // KV heads on this rank
  int32_t head_dim = 0;
  float scale = 1.0f;
  // host, [num_heads]: the local KV head each local query head reads (ShardPlan::kv_head_of_q);
  // non-decreasing, so a KV head's query heads are contiguous. An uneven TP split gives KV heads
  // groups of different sizes on one rank. Null: the even split, head h reads h / (heads /
  // kv_heads).
  const int32_t* kv_head_of = nullptr;
};

// The KV head query head `h` of `b` reads.
inline int32_t kv_head_for(const AttentionBatch& b, int32_t h) {
  return b.kv_head_of ? b.kv_head_of[h] : h / (b.num_heads / b.num_kv_heads);
}

// True when every KV head of `b` is read by a contiguous, non-empty run of query heads, in
// order (what the kernels assume): the map starts at 0, steps by 0 or 1 and ends at
// num_kv_heads - 1; without a map, num_kv_heads divides num_heads.
inline bool heads_are_grouped(const AttentionBatch& b) {
  if (b.num_kv_heads <= 0 || b.num_heads < b.num_kv_heads) return false;
  if (!b.kv_head_of) return b.num_heads % b.num_kv_heads == 0;
  if (b.kv_head_of[0] != 0 || b.kv_head_of[b.num_heads - 1] != b.num_kv_heads - 1) return false;
  for (int32_t h = 1; h < b.num_heads; ++h) {
    const int32_t step = b.kv_head_of[h] - b.kv_head_of[h - 1];
    if (step != 0 && step != 1) return false;
  }
  return true;
}

// The paged KV cache of one layer: K and V pools of [num_blocks, block_size, kv_heads, head_dim]
// elements of `dtype` (F32, BF16 or F8_E4M3). A token's slot is block_id * block_size +
// offset_in_block.
// F8_E4M3 stores each (slot, KV head) vector with its own float32 scale, k_scale/v_scale
// [num_blocks * block_size, kv_heads]: element = e4m3 value * scale, scale = the vector's
// largest |x| / 448 (kv_dtype.h says why per token and head rather than one per head).
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::F32;
  float* k_scale = nullptr;  // F8_E4M3 only
  float* v_scale = nullptr;
};

}  // namespace qmpi
