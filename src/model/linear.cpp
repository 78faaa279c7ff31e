#include "model/linear.h"

namespace qmpi {

void Linear::forward(Backend& be, const float* x, int64_t n, float* out) const {
  const WeightView b = bias.view();
  if (int4)
    be.matmul_int4(x, n, int4.view(), bias ? &b : nullptr, out);
  else
    be.matmul(x, n, weight.view(), bias ? &b : nullptr, out);
}

}  // namespace qmpi
