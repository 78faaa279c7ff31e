#include "engine/last_stage.h"

#include <algorithm>
#include <limits>

#include "core/errors.h"
#include "engine/sampler.h"

namespace qmpi {

StepResult LastStage::finish_step(const StepPlan& plan, std::span<float> logits, int64_t V) {
  StepResult r;
  size_t row = 0;
  for (const auto& s : plan.seqs) {
    auto& hist = history_[s.id];
    if (s.first_chunk) hist = s.cached_prefix;
    hist.insert(hist.end(), s.tokens.begin(), s.tokens.end());
    const size_t rows = s.all_logits ? s.tokens.size() : (s.sample ? 1 : 0);
    if ((row + rows) * size_t(V) > logits.size())
      raise(Err::Internal, "the step's logits have fewer rows than its plan asks for");
    if (s.all_logits)
      r.logits.insert(r.logits.end(), logits.begin() + long(row * V),
                      logits.begin() + long((row + rows) * V));
    if (s.sample) {
      std::span<float> last(logits.data() + (row + rows - 1) * V, size_t(V));
      const int64_t valid = plan.valid_vocab > 0 ? std::min(plan.valid_vocab, V) : V;
      const Sampled sm = sample_token(last, valid, s.sampling, s.sample_index, hist, s.allowed);
      r.tokens.push_back(sm.token);
      r.logprobs.push_back(sm.logprob);
      // Always k entries per sample (padded when the vocabulary is smaller), so that rank 0
      // finds each sample's alternatives by position.
      for (int32_t i = 0; i < s.sampling.top_logprobs; ++i) {
        const bool have = size_t(i) < sm.top.size();
        r.top_tokens.push_back(have ? sm.top[size_t(i)].token : -1);
        r.top_logprobs.push_back(have ? sm.top[size_t(i)].logprob
                                      : -std::numeric_limits<float>::infinity());
      }
    }
    row += rows;
  }
  return r;
}

void LastStage::forget(const std::vector<int64_t>& finished) {
  for (int64_t id : finished) history_.erase(id);
}

}  // namespace qmpi
