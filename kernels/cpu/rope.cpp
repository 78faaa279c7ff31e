#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

void check_freqs(const RopeFreqs& f) {
  if (f.head_dim <= 0 || f.head_dim % 2 != 0 || !f.inv_freq)
    raise(Err::Internal, "rope needs an even head_dim, got " + std::to_string(f.head_dim));
}

void check_positions(const int32_t* positions, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (positions[i] < 0)
      raise(Err::Internal, "rope got position " + std::to_string(positions[i]) + " for token " +
                               std::to_string(i));
}

// cos/sin of position p under inv_freq[half], as Hugging Face rounds them.
void angles(int64_t p, const float* inv_freq, int64_t half, float attention, float* c, float* s) {
  for (int64_t m = 0; m < half; ++m) {
    const float angle = float(p) * inv_freq[m];
    c[m] = float(std::cos(double(angle))) * attention;
    s[m] = float(std::sin(double(angle))) * attention;
  }
}

void rotate(float* v, const float* c, const float* s, int64_t half) {
#pragma omp simd
  for (int64_t m = 0; m < half; ++m) {
    const float a = v[m], b = v[m + half];
    v[m] = a * c[m] - b * s[m];
    v[m + half] = b * c[m] + a * s[m];
  }
}

}  // namespace

RopeTable::RopeTable(const RopeFreqs& f)
    : head_dim_(f.head_dim),
      attention_(f.attention),
      inv_freq_((check_freqs(f), f.inv_freq), f.inv_freq + f.head_dim / 2) {}

bool RopeTable::matches(const RopeFreqs& f) const {
  return f.head_dim == head_dim_ && f.attention == attention_ &&
         std::equal(inv_freq_.begin(), inv_freq_.end(), f.inv_freq);
}

void RopeTable::cover(int32_t position) {
  if (position < rows_) return;
  const int64_t half = head_dim_ / 2;
  // Grow geometrically so that decode, one position at a time, rarely recomputes.
  const int64_t rows = std::max<int64_t>(int64_t(position) + 1, std::max<int64_t>(rows_ * 2, 256));
  cos_.resize(size_t(rows * half));
  sin_.resize(size_t(rows * half));
  for (int64_t p = rows_; p < rows; ++p)
    angles(p, inv_freq_.data(), half, attention_, cos_.data() + p * half, sin_.data() + p * half);
  rows_ = rows;
}

void RopeTable::apply(float* x, int64_t n, int32_t heads, const int32_t* positions, int threads) {
  check_positions(positions, n);
  if (n > 0) cover(*std::max_element(positions, positions + n));
  const int64_t half = head_dim_ / 2;
  const int nt = threads_for(threads, n * heads * head_dim_, 1 << 15);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* c = cos_.data() + int64_t(positions[i]) * half;
    const float* s = sin_.data() + int64_t(positions[i]) * half;
    for (int32_t h = 0; h < heads; ++h) rotate(x + (i * heads + h) * head_dim_, c, s, half);
  }
}

void rope_per_token(float* x, int64_t n, int32_t heads, const int32_t* positions,
                    const RopeFreqs& f, int threads) {
  check_freqs(f);
  check_positions(positions, n);
  if (f.rows != n)
    raise(Err::Internal, "rope got " + std::to_string(f.rows) + " frequency rows for " +
                             std::to_string(n) + " tokens");
  const int64_t half = f.head_dim / 2;
  const int nt = threads_for(threads, n * heads * f.head_dim, 1 << 15);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    angles(positions[i], f.inv_freq + i * half, half, f.attention, c.data(), s.data());
    for (int32_t h = 0; h < heads; ++h)
      rotate(x + (i * heads + h) * f.head_dim, c.data(), s.data(), half);
  }
}

}  // namespace qmpi::cpu
