// Random inputs and error measures shared by the kernel tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace qmpi::test {

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// A weight in host memory, in the given dtype, from normal(0, scale) values.
struct HostWeight {
  std::vector<uint8_t> bytes;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  WeightView view() const { return {bytes.data(), dtype, rows, cols, nullptr}; }
};

inline HostWeight random_weight(DType t, int64_t rows, int64_t cols, std::mt19937& rng,
                                float scale = 1.0f) {
  HostWeight w{std::vector<uint8_t>(size_t(rows * cols) * dtype_size(t)), t, rows, cols};
  std::vector<float> v = random_floats(size_t(rows * cols), rng, scale);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(w.bytes.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t h = t == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
    }
  }
  return w;
}

// max |a - b| / max |b|: the error relative to the size of the reference's values, which
// stays meaningful where single reference values are close to zero.
inline double max_rel_err(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}
inline double max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return max_rel_err(a.data(), b.data(), std::min(a.size(), b.size()));
}

}  // namespace qmpi::test
