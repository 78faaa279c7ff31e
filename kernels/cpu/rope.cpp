#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {

RopeTable::RopeTable(double theta, int32_t head_dim) : theta_(theta), head_dim_(head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    raise(Err::Internal, "rope needs an even head_dim, got " + std::to_string(head_dim));
  const int32_t half = head_dim / 2;
  inv_freq_.resize(size_t(half));
  for (int32_t m = 0; m < half; ++m) {
    const float expo = float(2 * m) / float(head_dim);
    inv_freq_[m] = 1.0f / float(std::pow(double(float(theta)), double(expo)));
  }
}

void RopeTable::cover(int32_t position) {
  if (position < rows_) return;
  const int64_t half = head_dim_ / 2;
  // Grow geometrically so that decode, one position at a time, rarely recomputes.
  const int64_t rows = std::max<int64_t>(int64_t(position) + 1, std::max<int64_t>(rows_ * 2, 256));
  cos_.resize(size_t(rows * half));
  sin_.resize(size_t(rows * half));
  for (int64_t p = rows_; p < rows; ++p)
    for (int64_t m = 0; m < half; ++m) {
      const float angle = float(p) * inv_freq_[m];
      cos_[p * half + m] = float(std::cos(double(angle)));
      sin_[p * half + m] = float(std::sin(double(angle)));
    }
  rows_ = rows;
}

void RopeTable::apply(float* x, int64_t n, int32_t heads, const int32_t* positions, int threads) {
  int32_t top = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (positions[i] < 0)
      raise(Err::Internal, "rope got position " + std::to_string(positions[i]) + " for token " +
                               std::to_string(i));
    top = std::max(top, positions[i]);
  }
  if (n > 0) cover(top);
  const int64_t half = head_dim_ / 2;
  const int nt = threads_for(threads, n * heads * head_dim_, 1 << 15);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* c = cos_.data() + int64_t(positions[i]) * half;
    const float* s = sin_.data() + int64_t(positions[i]) * half;
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + (i * heads + h) * head_dim_;
#pragma omp simd
      for (int64_t m = 0; m < half; ++m) {
        const float a = v[m], b = v[m + half];
        v[m] = a * c[m] - b * s[m];
        v[m + half] = b * c[m] + a * s[m];
      }
    }
  }
}

}  // namespace qmpi::cpu
