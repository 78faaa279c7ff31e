#include "requests/generate.h"

#include <algorithm>
#include <chrono>

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

GenerateResult generate(Executor& ex, BlockManager& blocks, const GenerateRequest& req) {
  if (req.prompt.empty()) raise(Err::RequestField, "the prompt is empty");
  SequenceGuard seq(blocks);
  GenerateResult res;
  const auto t0 = std::chrono::steady_clock::now();
  auto t_first = t0;

  const int64_t n = int64_t(req.prompt.size());
  int64_t pos = 0;
  std::vector<int32_t> feed;  // tokens for the next step
  while (int64_t(res.output.size()) < req.max_tokens) {
    StepSeq s;
    s.id = 1;
    s.start_pos = int32_t(pos);
    if (pos < n) {
      const int64_t len = step_len(req.prefill, req.chunk, n - pos);
      s.tokens.assign(req.prompt.begin() + pos, req.prompt.begin() + pos + len);
    } else {
      s.tokens = feed;
    }
    s.first_chunk = pos == 0;
    s.sample = pos + int64_t(s.tokens.size()) >= n;  // only after the whole prompt is in
    s.sampling = req.sampling;
    s.sample_index = uint32_t(res.output.size());
    reserve(blocks, seq.table, pos + int64_t(s.tokens.size()));
    s.block_table = seq.table;
    pos += int64_t(s.tokens.size());

    StepPlan plan;
    plan.seqs.push_back(std::move(s));
    const StepResult r = ex.step(plan);
    if (r.tokens.empty()) continue;  // a prompt chunk before the last

    const int32_t tok = r.tokens[0];
    if (res.output.empty()) t_first = std::chrono::steady_clock::now();
    res.output.push_back(tok);
    feed = {tok};
  }
  // Let the last stage drop the sequence's penalty history.
  StepPlan done;
  done.finished.push_back(1);
  ex.step(done);
  const auto t_end = std::chrono::steady_clock::now();
  res.prefill_s = std::chrono::duration<double>(t_first - t0).count();
  res.decode_s = std::chrono::duration<double>(t_end - t_first).count();
  return res;
}

}  // namespace qmpi
