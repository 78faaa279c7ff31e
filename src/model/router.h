// The MoE router's choice on the host (facts §2c steps 2-4): softmax over all experts, the k
// most probable, their weights renormalised to sum to 1 when norm_topk_prob. Router logits are
// [tokens, experts] floats, small enough to copy off any device, so the CPU and CUDA paths
// share this code. Ties go to the lower expert index, as torch.topk does.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/layout.h"

namespace qmpi {

struct Routing {
  int64_t tokens = 0, k = 0;
  std::vector<int32_t> expert;  // [tokens, k], most probable first
  std::vector<float> weight;    // [tokens, k]
};

Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t k,
                     bool norm_topk_prob);

// The tokens routed to one expert, in token order, with their routing weights.
struct ExpertTokens {
  std::vector<int32_t> rows;
  std::vector<float> weights;
};

// [experts.size()]: the tokens of each expert in `experts` (a rank's share); an expert no token
// chose gets an empty entry.
std::vector<ExpertTokens> group_by_expert(const Routing& routing, Range experts);

}  // namespace qmpi
