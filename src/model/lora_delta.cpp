#include "model/lora_delta.h"

#include <vector>

namespace qmpi {

void LoraDelta::add(const Linear& lin, const float* x, int64_t n, std::span<const LoraRows> groups,
                    float* out) {
  for (const LoraRows& g : groups) {
    if (size_t(g.adapter) >= lin.lora.size() || !lin.lora[size_t(g.adapter)]) continue;
    const LoraWeight& lw = lin.lora[size_t(g.adapter)];
    const auto m = int64_t(g.rows.size());
    const int64_t in = lw.a.cols, r = lw.a.rows, width = lw.b.rows;
    // A group of every row in order (one adapter for the whole step) reads x as it is.
    const bool all_rows = m == n && g.rows.back() == int32_t(n - 1);
    const float* xs = x;
    if (!all_rows) {
      float* gathered = scratch_.get(kRowsX, size_t(m * in));
      be_.gather_rows(x, g.rows.data(), m, in, gathered);
      xs = gathered;
    }
    float* low = scratch_.get(kLow, size_t(m * r));
    float* delta = scratch_.get(kDelta, size_t(m * width));
    be_.matmul(xs, m, lw.a.view(), nullptr, low);
    be_.matmul(low, m, lw.b.view(), nullptr, delta);
    const std::vector<float> scales(size_t(m), lw.scale);
    be_.scatter_add_rows(delta, g.rows.data(), scales.data(), m, width, out);
  }
}

}  // namespace qmpi
