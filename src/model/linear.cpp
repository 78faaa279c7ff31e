#include "model/linear.h"

#include <algorithm>
#include <vector>

namespace qmpi {

void Linear::forward(Backend& be, const GemmInput& x, int64_t n, float* out) const {
  const WeightView b = bias.view();
  if (int4)
    be.matmul_int4(x.x, n, int4.view(), bias ? &b : nullptr, out);
  else if (fp8)
    be.matmul_fp8(x.x, n, fp8.view(), bias ? &b : nullptr, out);
  else if (ggml)
    be.matmul_ggml(x.x, n, ggml.view(), bias ? &b : nullptr, out);
  else
    be.matmul(x, n, weight.view(), bias ? &b : nullptr, out);
}

void forward_group(Backend& be, const GemmInput& x, int64_t n, std::span<const LinearOut> group) {
  const bool dense = std::none_of(group.begin(), group.end(), [](const LinearOut& g) {
    return g.linear->int4 || g.linear->fp8 || g.linear->ggml;
  });
  if (!dense) {
    for (const LinearOut& g : group) g.linear->forward(be, x, n, g.out);
    return;
  }
  // The targets point at these views: both live until matmul_group returns.
  std::vector<WeightView> biases;
  std::vector<MatmulTarget> targets;
  biases.reserve(group.size());
  targets.reserve(group.size());
  for (const LinearOut& g : group) {
    biases.push_back(g.linear->bias.view());
    targets.push_back({g.linear->weight.view(), g.linear->bias ? &biases.back() : nullptr, g.out});
  }
  be.matmul_group(x, n, targets);
}

}  // namespace qmpi
