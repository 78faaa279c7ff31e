#include "model/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace qmpi {

Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t k,
                     bool norm_topk_prob) {
  Routing r;
  r.tokens = tokens;
  r.k = k;
  r.expert.resize(size_t(tokens * k));
  r.weight.resize(size_t(tokens * k));
  std::vector<double> prob(static_cast<size_t>(num_experts));
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * num_experts;
    const float top = *std::max_element(row, row + num_experts);
    double sum = 0;
    for (int64_t e = 0; e < num_experts; ++e)
      sum += prob[size_t(e)] = std::exp(double(row[e] - top));
    for (double& p : prob) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return prob[size_t(a)] > prob[size_t(b)] || (prob[size_t(a)] == prob[size_t(b)] && a < b);
    });
    double chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += prob[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const double p = prob[size_t(order[size_t(j)])];
      r.expert[size_t(t * k + j)] = order[size_t(j)];
      r.weight[size_t(t * k + j)] = float(norm_topk_prob ? p / chosen : p);
    }
  }
  return r;
}

std::vector<ExpertTokens> group_by_expert(const Routing& routing, Range experts) {
  std::vector<ExpertTokens> out(size_t(experts.size()));
  for (int64_t t = 0; t < routing.tokens; ++t)
    for (int64_t j = 0; j < routing.k; ++j) {
      const int64_t e = routing.expert[size_t(t * routing.k + j)];
      if (e < experts.begin || e >= experts.end) continue;
      out[size_t(e - experts.begin)].rows.push_back(int32_t(t));
      out[size_t(e - experts.begin)].weights.push_back(routing.weight[size_t(t * routing.k + j)]);
    }
  return out;
}

}  // namespace qmpi
