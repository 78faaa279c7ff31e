// Rotate-half (NeoX) rotary position embedding with cos/sin cached per position.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// cos/sin of every position seen so far for one shared row of inverse frequencies (rows 1).
// Angles follow Hugging Face: angle = position * inv_freq[m] in float32; cos and sin are
// multiplied by the attention factor in float32.
class RopeTable {
 public:
  explicit RopeTable(const RopeFreqs& f);
  bool matches(const RopeFreqs& f) const;
  // Rotates x[n, heads, head_dim] in place: element m pairs with element m + head_dim / 2.
  void apply(float* x, int64_t n, int32_t heads, const int32_t* positions, int threads);

 private:
  void cover(int32_t position);  // makes the table hold rows 0..position

  int32_t head_dim_;
  float attention_;
  std::vector<float> inv_freq_;
  std::vector<float> cos_, sin_;  // [rows, head_dim / 2]
  int64_t rows_ = 0;
};

// The same rotation with one row of frequencies per token (f.rows == n), computed directly:
// such rows change from step to step, so there is nothing to cache.
void rope_per_token(float* x, int64_t n, int32_t heads, const int32_t* positions,
                    const RopeFreqs& f, int threads);

}  // namespace qmpi::cpu
