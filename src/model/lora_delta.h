// The LoRA deltas of a step on the projections that read one x: a segmented low-rank GEMM. For
// each adapter the step uses, its rows of x are multiplied by A^T (down to r columns) and by
// B^T, scaled and added to the projection's output rows; rows of other adapters and of the base
// model are untouched. Weights are never merged, so one step serves any mix of adapters.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/linear.h"
#include "model/scratch.h"

namespace qmpi {

class LoraDelta {
 public:
  explicit LoraDelta(Backend& be) : be_(be), scratch_(be, kSlots) {}

  // For each target (q/k/v, gate/up, or one projection) out[row, :] += scale * B (A x[row, :])
  // for every row of each group whose adapter adapts it; x is [n, in_features], each out
  // [n, out_features]. One fused backend op (Backend::lora_delta) for all of them where the
  // backend has one.
  void add(std::span<const LinearOut> targets, const float* x, int64_t n,
           std::span<const LoraRows> groups);

 private:
  // A backend without the fused op: gather, two matmuls and a scatter-add per segment.
  void add_unfused(const float* x, int64_t n);

  enum { kRowsX, kLow, kDelta, kSlots };
  Backend& be_;
  Scratch scratch_;
  std::vector<LoraSegment> segments_;  // this call's, reused
  std::vector<float> scales_;
};

}  // namespace qmpi
