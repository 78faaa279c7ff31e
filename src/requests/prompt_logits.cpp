#include "requests/prompt_logits.h"

#include <algorithm>

#include "core/errors.h"

namespace qmpi {
namespace {

// Returns the sequence's blocks however we leave (errors included).
class SequenceGuard {
 public:
  explicit SequenceGuard(BlockManager& blocks) : blocks_(blocks) {}
  ~SequenceGuard() { blocks_.release(table); }
  std::vector<int32_t> table;

 private:
  BlockManager& blocks_;
};

int64_t step_len(PrefillMode mode, int64_t chunk, int64_t remaining) {
  switch (mode) {
    case PrefillMode::Incremental:
      return 1;
    case PrefillMode::Chunked:
      return std::min(std::max<int64_t>(chunk, 1), remaining);
    case PrefillMode::Whole:
      break;
  }
  return remaining;
}

void reserve(BlockManager& blocks, std::vector<int32_t>& table, int64_t tokens) {
  if (!blocks.ensure(table, tokens))
    raise(Err::PromptTooLong,
          "the sequence needs " + std::to_string(tokens) + " tokens of KV cache but only " +
              std::to_string(blocks.free_blocks() * blocks.block_size()) + " are free",
          "Lower the prompt length or max tokens, or raise --max-model-len.");
}

}  // namespace

std::vector<float> prompt_logits(Executor& ex, BlockManager& blocks,
                                 const std::vector<int32_t>& prompt, PrefillMode mode,
                                 int64_t chunk, int32_t adapter) {
  SequenceGuard seq(blocks);
  std::vector<float> out;
  out.reserve(prompt.size() * size_t(ex.vocab_size()));
  const int64_t n = int64_t(prompt.size());
  for (int64_t at = 0; at < n;) {
    const int64_t len = step_len(mode, chunk, n - at);
    reserve(blocks, seq.table, at + len);
    StepPlan plan;
    StepSeq s;
    s.id = 0;
    s.start_pos = int32_t(at);
    s.tokens.assign(prompt.begin() + at, prompt.begin() + at + len);
    s.block_table = seq.table;
    s.all_logits = true;
    s.sample = false;
    s.first_chunk = at == 0;
    s.adapter = adapter;
    plan.seqs.push_back(std::move(s));
    if (at + len == n) plan.finished.push_back(0);
    StepResult r = ex.step(plan);
    out.insert(out.end(), r.logits.begin(), r.logits.end());
    at += len;
  }
  return out;
}

}  // namespace qmpi
