// Grid and block sizes of every CUDA kernel, as pure functions: the .cu launchers use them and
// the host-side tests check them without a device. A grid dimension of 0 means "nothing to do"
// (the launcher then skips the launch, since CUDA rejects empty grids).
#pragma once
#include <algorithm>
#include <cstdint>

namespace qmpi::cuda {

struct LaunchShape {
  uint32_t grid_x = 0;
  uint32_t grid_y = 1;
  uint32_t block = 0;

  bool empty() const { return grid_x == 0 || grid_y == 0 || block == 0; }
};

// Hardware limits of every GPU qmpi targets (sm_80 and newer).
inline constexpr int64_t kMaxGridX = 2147483647;
inline constexpr int64_t kMaxGridY = 65535;
inline constexpr uint32_t kMaxBlock = 1024;
inline constexpr uint32_t kWarp = 32;

// Element-wise kernels loop grid-stride, so their grid is capped: more blocks than a few waves
// of the largest GPU only add scheduling cost.
inline constexpr uint32_t kElementwiseThreads = 256;
inline constexpr int64_t kMaxElementwiseBlocks = 65536;

// Attention: one block of 4 warps per (query row, query head); head_dim up to 256 lives in
// registers as 8 floats per lane.
inline constexpr uint32_t kAttentionThreads = 128;
inline constexpr int32_t kAttentionMaxHeadDim = 256;

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// count independent elements, grid-stride.
inline LaunchShape elementwise_shape(int64_t count) {
  if (count <= 0) return {};
  const int64_t blocks = std::min(ceil_div(count, kElementwiseThreads), kMaxElementwiseBlocks);
  return {uint32_t(blocks), 1, kElementwiseThreads};
}

// One block per row of `width` elements (RMSNorm, embedding): about 4 elements per thread, a
// whole number of warps (the row reduction works warp by warp), at most 1024 threads.
inline LaunchShape row_shape(int64_t rows, int64_t width) {
  if (rows <= 0 || width <= 0 || rows > kMaxGridX) return {};
  const int64_t per_thread = 4;
  int64_t threads = ceil_div(ceil_div(width, per_thread), kWarp) * kWarp;
  threads = std::clamp<int64_t>(threads, kWarp, kMaxBlock);
  return {uint32_t(rows), 1, uint32_t(threads)};
}

// RoPE: one thread per (token, rotation pair); each thread rotates that pair in every head, so
// the angle is computed once per token and pair.
inline LaunchShape rope_shape(int64_t tokens, int32_t head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0) return {};
  return elementwise_shape(tokens * (head_dim / 2));
}

// KV store: one warp per new (token, KV head) vector (fp8 needs the vector's largest |x|).
inline LaunchShape kv_store_shape(int64_t tokens, int32_t kv_heads, int32_t head_dim) {
  if (head_dim <= 0) return {};
  return elementwise_shape(tokens * int64_t(kv_heads) * kWarp);
}

// Attention: grid (query rows x key chunks, query heads); chunks is 1 without a split.
inline LaunchShape attention_shape(int64_t rows, int32_t heads, int32_t head_dim,
                                   int32_t chunks = 1) {
  if (rows <= 0 || heads <= 0 || chunks <= 0 || heads > kMaxGridY) return {};
  if (rows > kMaxGridX / chunks) return {};
  if (head_dim <= 0 || head_dim > kAttentionMaxHeadDim) return {};
  return {uint32_t(rows * chunks), uint32_t(heads), kAttentionThreads};
}

// Flash-decoding. A decode batch has one query row per sequence, so with few sequences the
// (row, head) blocks cannot fill the GPU, and each walks its whole context alone. Splitting
// every row's keys into chunks (one block each, then a combine kernel) restores the
// parallelism. Worth it only when the blocks are fewer than kSplitBlocksPerSm per SM and a
// chunk still has kSplitMinChunkKeys keys to amortise its partial write and the combine.
inline constexpr int64_t kSplitBlocksPerSm = 4;
inline constexpr int32_t kSplitMinChunkKeys = 256;
inline constexpr int32_t kSplitMaxChunks = 64;

struct AttentionSplit {
  int32_t chunks = 1;      // key chunks per (row, head); 1 is the single-pass kernel
  int32_t chunk_keys = 0;  // keys per chunk (the last may have fewer, or none for short rows)
};

// `max_keys`: the longest context in the batch; `multiprocessors`: the device's SM count.
inline AttentionSplit attention_split(int64_t rows, int32_t heads, int32_t max_keys,
                                      int32_t multiprocessors) {
  const int64_t pairs = rows * heads, target = kSplitBlocksPerSm * multiprocessors;
  const AttentionSplit single{1, std::max(max_keys, 1)};
  if (pairs <= 0 || pairs >= target || max_keys < 2 * kSplitMinChunkKeys) return single;
  const int64_t want = std::min<int64_t>(
      {ceil_div(target, pairs), max_keys / kSplitMinChunkKeys, int64_t(kSplitMaxChunks)});
  // A multiple of 64 keys ends chunks on KV-block boundaries for the usual block sizes (16, 32),
  // so no block's keys are read by two chunks.
  const int64_t keys = ceil_div(ceil_div(max_keys, want), 64) * 64;
  const int32_t chunks = int32_t(ceil_div(max_keys, keys));
  if (chunks < 2) return single;
  return {chunks, int32_t(keys)};
}

// The most (row, head, chunk) partial results a split can produce on a device: pairs < target
// and chunks <= ceil(target / pairs), so pairs * chunks < 2 * target. The backend keeps a
// workspace of this many partials, so a split never allocates during a step.
inline int64_t attention_split_max_partials(int32_t multiprocessors) {
  return 2 * kSplitBlocksPerSm * multiprocessors;
}

// Bytes of that workspace: per partial, an output row of up to kAttentionMaxHeadDim floats, its
// max and its sum (about 1 MiB on a 132-SM GPU, inside plan/memory_model.h's CUDA overhead).
inline int64_t attention_split_workspace_bytes(int32_t multiprocessors) {
  return attention_split_max_partials(multiprocessors) * (kAttentionMaxHeadDim + 2) * 4;
}

}  // namespace qmpi::cuda
