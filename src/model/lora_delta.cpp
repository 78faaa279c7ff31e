#include "model/lora_delta.h"

namespace qmpi {

void LoraDelta::add(std::span<const LinearOut> targets, const float* x, int64_t n,
                    std::span<const LoraRows> groups) {
  segments_.clear();
  for (const LinearOut& t : targets)
    for (const LoraRows& g : groups) {
      const std::vector<LoraWeight>& lora = t.linear->lora;
      if (size_t(g.adapter) >= lora.size() || !lora[size_t(g.adapter)] || g.rows.empty()) continue;
      const LoraWeight& lw = lora[size_t(g.adapter)];
      segments_.push_back(
          {lw.a.view(), lw.b.view(), lw.scale, g.rows.data(), int64_t(g.rows.size()), t.out});
    }
  if (segments_.empty() || be_.lora_delta(x, n, segments_)) return;
  add_unfused(x, n);
}

void LoraDelta::add_unfused(const float* x, int64_t n) {
  for (const LoraSegment& s : segments_) {
    const int64_t m = s.count, in = s.a.cols, r = s.a.rows, width = s.b.rows;
    // A group of every row in order (one adapter for the whole step) reads x as it is.
    const bool all_rows = m == n && s.rows[m - 1] == int32_t(n - 1);
    const float* xs = x;
    if (!all_rows) {
      float* gathered = scratch_.get(kRowsX, size_t(m * in));
      be_.gather_rows(x, s.rows, m, in, gathered);
      xs = gathered;
    }
    float* low = scratch_.get(kLow, size_t(m * r));
    float* delta = scratch_.get(kDelta, size_t(m * width));
    be_.matmul(xs, m, s.a, nullptr, low);
    be_.matmul(low, m, s.b, nullptr, delta);
    scales_.assign(size_t(m), s.scale);
    be_.scatter_add_rows(delta, s.rows, scales_.data(), m, width, s.out);
  }
}

}  // namespace qmpi
