#include "backend/cuda/graph_book.h"

#include <limits>

namespace qmpi::cuda {

int32_t graph_context(int32_t max_context) {
  int64_t c = kGraphMinContext;
  while (c < max_context) c *= 2;
  return c > std::numeric_limits<int32_t>::max() ? 0 : int32_t(c);
}

std::optional<GraphKey> graph_key(const StepShape& shape) {
  if (!shape.decode || shape.tokens <= 0 || shape.tokens > kGraphMaxTokens) return std::nullopt;
  const int32_t context = graph_context(shape.max_context);
  if (context == 0) return std::nullopt;
  return GraphKey{shape.tokens, context};
}

GraphDecision GraphBook::next(const GraphKey& key, uint64_t frees) {
  GraphDecision d;
  if (frees_ != frees) {
    // Warm-ups seen before the free no longer prove that the buffers are large enough.
    d.drop_all = !recorded_.empty();
    recorded_.clear();
    seen_.clear();
    frees_ = frees;
  }
  if (refused_.contains(key)) return d;
  if (recorded_.contains(key)) {
    d.action = GraphAction::Replay;
    return d;
  }
  if (seen_.insert(key).second || recorded_.size() >= kMaxGraphs) return d;
  d.action = GraphAction::Capture;
  return d;
}

}  // namespace qmpi::cuda
