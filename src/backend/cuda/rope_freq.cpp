#include "backend/cuda/rope_freq.h"

#include <cmath>
#include <string>

#include "core/errors.h"

namespace qmpi::cuda {

std::vector<float> rope_inv_freq(double theta, int32_t head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    raise(Err::Internal, "rope needs an even head_dim, got " + std::to_string(head_dim));
  std::vector<float> inv(size_t(head_dim / 2));
  for (int32_t m = 0; m < head_dim / 2; ++m) {
    const float expo = float(2 * m) / float(head_dim);
    inv[size_t(m)] = 1.0f / float(std::pow(double(float(theta)), double(expo)));
  }
  return inv;
}

}  // namespace qmpi::cuda
