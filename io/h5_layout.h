// How `qmpi convert` chunks each tensor. Chunks are cut along the dimension tensor parallelism
// splits (rows of q/k/v/gate/up/embed_tokens/lm_head, columns of o_proj/down_proj) and hold
// whole heads for attention tensors, so a rank's slice is a few whole chunks, each contiguous
// in the file:
//   units  = heads (q/k/v/o) or rows/columns (MLP, vocab) along that dimension
//   chunks = gcd(units, 24), since 24 = lcm(1, 2, 3, 4, 6, 8): every one of those TP sizes that
//            divides `units` hands each rank chunks/tp whole chunks
//   while a chunk is over 64 MiB, chunks *= the smallest prime factor of units/chunks
// Tensors TP does not split (norms) are one chunk unless over 64 MiB. The reader does not
// depend on this rule: any chunking (or none) loads; the rule only makes loads fast.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qmpi {

inline constexpr int64_t kChunkTpSizes = 24;
inline constexpr uint64_t kMaxChunkBytes = uint64_t{64} << 20;

struct TpSplit {
  int dim = -1;      // -1: replicated on every TP rank
  int64_t unit = 1;  // elements of `dim` that move together (head_dim for attention heads)
};

// The split of a Hugging Face Qwen2 tensor name (as src/model/shard_plan.cpp slices it).
TpSplit tp_split(const std::string& name, int64_t head_dim);

// The chunk shape for a tensor; empty when it must be stored contiguous (a scalar or a tensor
// with a zero extent, which HDF5 cannot chunk).
std::vector<int64_t> chunk_shape(const std::vector<int64_t>& shape, TpSplit split,
                                 size_t elem_size);

}  // namespace qmpi
