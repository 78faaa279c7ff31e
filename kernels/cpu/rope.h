// Rotate-half (NeoX) rotary position embedding with cos/sin cached per position.
#pragma once
#include <cstdint>
#include <vector>

namespace qmpi::cpu {

// cos/sin of every position seen so far for one (theta, head_dim). Angles follow Hugging Face:
// inv_freq[m] = 1 / theta^(2m / d) and angle = position * inv_freq[m], both in float32.
class RopeTable {
 public:
  RopeTable(double theta, int32_t head_dim);
  bool matches(double theta, int32_t head_dim) const {
    return theta == theta_ && head_dim == head_dim_;
  }
  // Rotates x[n, heads, head_dim] in place: element m pairs with element m + head_dim / 2.
  void apply(float* x, int64_t n, int32_t heads, const int32_t* positions, int threads);

 private:
  void cover(int32_t position);  // makes the table hold rows 0..position

  double theta_;
  int32_t head_dim_;
  std::vector<float> inv_freq_;
  std::vector<float> cos_, sin_;  // [rows, head_dim / 2]
  int64_t rows_ = 0;
};

}  // namespace qmpi::cpu
