#include "engine/last_stage.h"

#include <algorithm>
#include <limits>

#include "core/errors.h"
#include "engine/sampler.h"

namespace qmpi {
namespace {

// One sampling sequence's share of the step: its first logit row, its history, what it samples.
struct SampleJob {
  const StepSeq* seq;
  size_t row;
  std::vector<int32_t>* hist;
  std::vector<Sampled> samples;  // 1 + the guesses the samples agreed with
};

// Each row is sampled as a plain decode step would sample it (the same history, the same
// (seed, sample_index) draw), and a guess is kept while it equals the sample. For a guess that is
// one token x (a point-mass draft), this is the modified rejection sampling of Leviathan et al.:
// x is accepted with probability p(x), and on rejection the sample is distributed as p without x,
// renormalized. Sharing the draw makes it also give the very tokens of the plain run, at any
// temperature. Touches only the job's own rows and history, so jobs run side by side.
void sample_rows(SampleJob& job, std::span<float> logits, int64_t V, int64_t valid) {
  const StepSeq& s = *job.seq;
  const std::span<const int32_t> guesses(s.tokens.data() + s.tokens.size() - s.draft,
                                         size_t(s.draft));
  for (int32_t i = 0; i <= s.draft; ++i) {
    std::span<float> row_logits(logits.data() + (job.row + size_t(i)) * size_t(V), size_t(V));
    // A mask (structured output) comes only with steps that carry no guesses.
    job.samples.push_back(
        sample_token(row_logits, valid, s.sampling, s.sample_index + uint32_t(i), *job.hist,
                     i == 0 ? std::span<const uint64_t>(s.allowed) : std::span<const uint64_t>()));
    const int32_t tok = job.samples.back().token;
    if (i == s.draft || tok != guesses[size_t(i)]) break;
    job.hist->push_back(tok);
  }
}

}  // namespace

StepResult LastStage::finish_step(const StepPlan& plan, std::span<float> logits, int64_t V,
                                  const TaskRunner& run) {
  StepResult r;
  std::vector<SampleJob> jobs;
  size_t row = 0;
  for (const auto& s : plan.seqs) {
    auto& hist = history_[s.id];  // references into the map survive its rehashing
    if (s.first_chunk) hist = s.cached_prefix;
    hist.insert(hist.end(), s.tokens.begin(), s.tokens.end());
    const size_t rows = s.all_logits ? s.tokens.size() : (s.sample ? size_t(1 + s.draft) : 0);
    if ((row + rows) * size_t(V) > logits.size())
      raise(Err::Internal, "the step's logits have fewer rows than its plan asks for");
    if (s.all_logits)
      r.logits.insert(r.logits.end(), logits.begin() + long(row * V),
                      logits.begin() + long((row + rows) * V));
    if (s.sample) {
      // Guesses join the history only once a sample agrees with them.
      hist.resize(hist.size() - size_t(s.draft));
      jobs.push_back({&s, row, &hist, {}});
    }
    row += rows;
  }

  // The sequences' samples side by side: each passes over the whole vocabulary (log-sum-exp,
  // penalties, top-k), so a serial loop left the other threads waiting at 16 and more sequences.
  const int64_t valid = plan.valid_vocab > 0 ? std::min(plan.valid_vocab, V) : V;
  const auto job = [&](int64_t j) { sample_rows(jobs[size_t(j)], logits, V, valid); };
  if (jobs.size() > 1)
    run(int64_t(jobs.size()), job);
  else if (jobs.size() == 1)  // a lone sequence pays no fork and join
    job(0);

  for (const SampleJob& j : jobs) {
    const int32_t k = j.seq->sampling.top_logprobs;
    for (const Sampled& sm : j.samples) {
      r.tokens.push_back(sm.token);
      r.logprobs.push_back(sm.logprob);
      // Always k entries per sample (padded when the vocabulary is smaller), so that rank 0
      // finds each sample's alternatives by position.
      for (int32_t t = 0; t < k; ++t) {
        const bool have = size_t(t) < sm.top.size();
        r.top_tokens.push_back(have ? sm.top[size_t(t)].token : -1);
        r.top_logprobs.push_back(have ? sm.top[size_t(t)].logprob
                                      : -std::numeric_limits<float>::infinity());
      }
    }
    r.counts.push_back(int32_t(j.samples.size()));
  }
  return r;
}

void LastStage::forget(const std::vector<int64_t>& finished) {
  for (int64_t id : finished) history_.erase(id);
}

}  // namespace qmpi
