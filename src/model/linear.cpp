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
  const auto all = [&](auto pred) { return std::all_of(group.begin(), group.end(), pred); };
  // The targets point at these views: both live until the group call returns.
  std::vector<WeightView> biases;
  biases.reserve(group.size());
  for (const LinearOut& g : group) biases.push_back(g.linear->bias.view());
  const auto bias_of = [&](size_t i) { return group[i].linear->bias ? &biases[i] : nullptr; };
  if (all([](const LinearOut& g) { return bool(g.linear->fp8); })) {
    std::vector<Fp8Target> targets;
    for (size_t i = 0; i < group.size(); ++i)
      targets.push_back({group[i].linear->fp8.view(), bias_of(i), group[i].out});
    return be.matmul_fp8_group(x.x, n, targets);
  }
  if (all([](const LinearOut& g) { return bool(g.linear->int4); })) {
    std::vector<Int4Target> targets;
    for (size_t i = 0; i < group.size(); ++i)
      targets.push_back({group[i].linear->int4.view(), bias_of(i), group[i].out});
    return be.matmul_int4_group(x.x, n, targets);
  }
  if (!all([](const LinearOut& g) {
        return !g.linear->int4 && !g.linear->fp8 && !g.linear->ggml;
      })) {
    for (const LinearOut& g : group) g.linear->forward(be, x, n, g.out);
    return;
  }
  std::vector<MatmulTarget> targets;
  for (size_t i = 0; i < group.size(); ++i)
    targets.push_back({group[i].linear->weight.view(), bias_of(i), group[i].out});
  be.matmul_group(x, n, targets);
}

}  // namespace qmpi
