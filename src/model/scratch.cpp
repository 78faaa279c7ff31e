#include "model/scratch.h"

#include <algorithm>

namespace qmpi {

float* Scratch::get(int slot, size_t floats) {
  Buffer& b = buffers_[size_t(slot)];
  if (b.bytes() < floats * sizeof(float))
    b = be_.alloc(std::max<size_t>(floats, 1) * sizeof(float));
  return b.as<float>();
}

}  // namespace qmpi
