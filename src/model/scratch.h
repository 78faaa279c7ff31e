// Step-sized work buffers in backend memory (float32, or a GEMM input's rounded copy), one per
// slot, grown on demand and reused across steps. Each block owns one, so its slots are its own
// business.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

class Scratch {
 public:
  Scratch(Backend& be, int slots) : be_(be), buffers_(size_t(slots)) {}

  // At least `floats` floats in `slot`; earlier contents are lost when it grows.
  float* get(int slot, size_t floats);
  // A GEMM input's rounded copy (backend/activation.h) in `slot`: rows x cols of `dtype`, or an
  // empty view for F32, where the backend's GEMM reads x itself (Backend::gemm_input_dtype).
  ActivationView rounded(int slot, DType dtype, int64_t rows, int64_t cols);

 private:
  Backend& be_;
  std::vector<Buffer> buffers_;
};

}  // namespace qmpi
