// Timed synthetic requests for `qmpi bench`, sent through the request pipeline and a scheduler
// exactly as `qmpi serve` and `qmpi batch` send theirs (continuous batching, chunked prefill, the
// prefix cache, --dp replicas), so the figures are the ones those commands get. Prompts are random
// ids below the model's vocabulary, each one new (no prefix-cache hit unless a shared prefix is
// asked for); sampling is greedy with end-of-sequence ignored, a fixed amount of work.
//
// Decode at batch B: B requests are admitted at once; the window opens when the last of them has
// its first token (every sequence decoding, none prefilling) and closes when each has had
// gen_len - 1 more tokens (or the first one ends). The requests still running are then cancelled.
// Rank 0 only; independent of MPI.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/draft_proposer.h"
#include "engine/sequence_scheduler.h"
#include "requests/sequence_spec.h"

namespace qmpi {

struct DecodeTiming {
  int64_t batch = 0;
  double prefill_s = 0.0;     // admission until every sequence had its first token
  double decode_s = 0.0;      // the window
  int64_t tokens = 0;         // tokens sampled in the window
  int64_t seq_steps = 0;      // (sequence, step) pairs in the window
  int64_t preemptions = 0;    // while the requests ran
  int64_t prompt_tokens = 0;  // per sequence, a shared prefix included

  double tokens_per_s() const { return double(tokens) / decode_s; }
  // One step of every sequence: the step time without pipeline stages, the time of one round of
  // micro-batches with them.
  double step_s() const { return decode_s * double(batch) / double(seq_steps); }
};

// Guesses `guesses` copies of the sequence's last token (fewer where fewer are allowed): a
// verification step costs the same whatever the guesses are and however many are accepted, so
// this times speculation's step.
class RepeatLastToken final : public DraftProposer {
 public:
  explicit RepeatLastToken(int32_t guesses) : guesses_(guesses) {}
  std::vector<int32_t> propose(const Sequence& s, int64_t max) override;

 private:
  int32_t guesses_;
};

// Tokens a bench request may generate: gen_len plus room for the steps before the window opens
// (prompt chunks of the other sequences under the max_batched_tokens budget).
int64_t bench_max_tokens(int64_t batch, int64_t prompt_tokens, int64_t gen_len,
                         int64_t max_batched_tokens);

class BenchRunner {
 public:
  // `sched` and `model` must outlive the runner. Prompt ids are drawn below `vocab`.
  BenchRunner(SequenceScheduler& sched, const ModelFacts& model, int64_t vocab, uint32_t seed);

  // `n` fresh random ids (a prefix-cache hit would need a whole KV block of them repeated).
  std::vector<int32_t> random_prompt(int64_t n);
  // One request of `prompt`, to its first token; returns the seconds from admission.
  double time_to_first_token(const std::vector<int32_t>& prompt);
  // Decodes from now on run LoRA adapters in turn, request i of a batch the adapter
  // names[i % names.size()] (--lora-modules names; empty: the base model).
  void use_adapters(std::vector<std::string> names) { adapters_ = std::move(names); }
  // `batch` requests, each `prefix` followed by `prompt_len` random ids, decoding together.
  // Raises Usage when the window cannot open (a sequence ends before the last one starts) or
  // --max-model-len leaves no room for gen_len tokens.
  DecodeTiming decode(int64_t batch, const std::vector<int32_t>& prefix, int64_t prompt_len,
                      int64_t gen_len);

 private:
  SequenceScheduler& sched_;
  const ModelFacts& model_;
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> token_;
  int64_t next_key_ = 0;
  std::vector<std::string> adapters_;
};

}  // namespace qmpi
