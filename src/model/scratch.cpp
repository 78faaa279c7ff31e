#include "model/scratch.h"

#include <algorithm>

namespace qmpi {

float* Scratch::get(int slot, size_t floats) {
  Buffer& b = buffers_[size_t(slot)];
  if (b.bytes() < floats * sizeof(float))
    b = be_.alloc(std::max<size_t>(floats, 1) * sizeof(float));
  return b.as<float>();
}

ActivationView Scratch::rounded(int slot, DType dtype, int64_t rows, int64_t cols) {
  if (dtype == DType::F32) return {};
  const size_t bytes = size_t(rows * cols) * dtype_size(dtype);
  return {get(slot, (bytes + sizeof(float) - 1) / sizeof(float)), dtype, rows, cols};
}

}  // namespace qmpi
