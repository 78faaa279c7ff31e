// One LoRA adapter's low-rank pair on one projection, as this rank holds it: the delta
// scale * B (A x) is added to the projection's output (model/lora_delta.h).
#pragma once
#include "backend/backend.h"

namespace qmpi {

struct LoraWeight {
  // Column-parallel projections (q/k/v, gate/up): A whole [r, in], B this rank's output rows.
  // Row-parallel ones (o, down): A this rank's input columns, B whole [out, r]; each rank's
  // B (A_slice x_slice) is then a partial sum that the projection's all-reduce completes.
  Weight a;  // [r, in_features of this rank]
  Weight b;  // [out_features of this rank, r]
  float scale = 0.0f;

  explicit operator bool() const { return static_cast<bool>(a); }
};

}  // namespace qmpi
