#include "plan/param_counts.h"

namespace qmpi {

ParamCounts param_counts(const ModelConfig& cfg) {
  ParamCounts c;
  for (const auto& t : expected_tensors(cfg)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    c.total += n;
    if (t.name.find(".mlp.experts.") != std::string::npos) c.experts += n;
  }
  const int64_t E = cfg.moe.num_experts, k = cfg.moe.experts_per_token;
  c.active = E > 0 ? c.total - c.experts + c.experts / E * k : c.total;
  return c;
}

}  // namespace qmpi
