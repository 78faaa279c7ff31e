#include "engine/draft_proposer.h"

#include <algorithm>

namespace qmpi {

std::vector<int32_t> prompt_lookup(std::span<const int32_t> ctx, int32_t min_n, int32_t max_n,
                                   int64_t max) {
  const auto len = int64_t(ctx.size());
  if (max < 1) return {};
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = ctx.subspan(size_t(len - n));
    // Latest first: recent text predicts the next tokens best. Starting at len - n - 1 at the
    // latest, an occurrence has at least one token after it.
    for (int64_t at = len - n - 1; at >= 0; --at) {
      if (!std::equal(suffix.begin(), suffix.end(), ctx.begin() + at)) continue;
      const int64_t from = at + n, to = std::min(len, from + max);
      return {ctx.begin() + from, ctx.begin() + to};
    }
  }
  return {};
}

std::vector<int32_t> NgramProposer::propose(const Sequence& s, int64_t max) {
  return prompt_lookup(s.tokens(0, s.total()), c_.prompt_lookup_min, c_.prompt_lookup_max,
                       std::min<int64_t>(max, c_.num_tokens));
}

std::shared_ptr<DraftProposer> make_proposer(const SpeculativeConfig& c) {
  if (!c.enabled() || !c.model.empty()) return nullptr;
  return std::make_shared<NgramProposer>(c);
}

}  // namespace qmpi
