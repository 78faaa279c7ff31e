// Step-sized float32 work buffers in backend memory, one per slot, grown on demand and reused
// across steps. Each block owns one, so its slots are its own business.
#pragma once
#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

class Scratch {
 public:
  Scratch(Backend& be, int slots) : be_(be), buffers_(size_t(slots)) {}

  // At least `floats` floats in `slot`; earlier contents are lost when it grows.
  float* get(int slot, size_t floats);

 private:
  Backend& be_;
  std::vector<Buffer> buffers_;
};

}  // namespace qmpi
