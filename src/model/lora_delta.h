// The LoRA delta of one projection for a step's row groups: a segmented low-rank GEMM. For each
// adapter the step uses, its rows of x are gathered, multiplied by A^T (down to r columns) and
// by B^T, scaled and added to the projection's output rows; rows of other adapters and of the
// base model are untouched. Weights are never merged, so one step serves any mix of adapters.
#pragma once
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/linear.h"
#include "model/scratch.h"

namespace qmpi {

class LoraDelta {
 public:
  explicit LoraDelta(Backend& be) : be_(be), scratch_(be, kSlots) {}

  // out[row, :] += scale * B (A x[row, :]) for every row of each group whose adapter adapts
  // `lin`; x is [n, lin.in_features()], out [n, lin.out_features()].
  void add(const Linear& lin, const float* x, int64_t n, std::span<const LoraRows> groups,
           float* out);

 private:
  enum { kRowsX, kLow, kDelta, kSlots };
  Backend& be_;
  Scratch scratch_;
};

}  // namespace qmpi
