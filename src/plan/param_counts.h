// Parameter counts of a config: every tensor once, and what one token reads (facts §7: an MoE
// token reads attention, norms, embedding, lm_head, routers, its k experts and the shared
// expert, never the other experts).
#pragma once
#include <cstdint>

#include "model/config.h"

namespace qmpi {

struct ParamCounts {
  int64_t total = 0;
  int64_t active = 0;   // per token; == total on dense models
  int64_t experts = 0;  // in routed experts (all of them)
};

ParamCounts param_counts(const ModelConfig& cfg);

}  // namespace qmpi
