// What the request pipeline and the command loops (batch, serve) need of a scheduler: queue
// sequences, step, end them, and report. Two implementations: Scheduler, which runs one mesh, and
// ReplicaScheduler, which spreads sequences over data-parallel replicas (one Scheduler each).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "engine/draft_proposer.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "engine/speculative_config.h"

namespace qmpi {

struct SchedulerConfig {
  int64_t max_num_seqs = 16;
  int64_t max_batched_tokens = 2048;  // tokens per step, prompt chunks and decodes together
  int64_t max_model_len = 4096;
  bool prefix_caching = true;
  int64_t micro_batches = 0;      // steps in flight at most (0: the runner's depth, one per stage)
  SpeculativeConfig speculative;  // guesses for decoding sequences (off by default)
  // speculative.model loaded on rank 0 (Engine::scheduler_config sets it; null elsewhere).
  std::shared_ptr<DraftProposer> draft_model;
};

// One sampled token of one sequence.
struct TokenEvent {
  int64_t seq = 0;
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // spec.sampling.top_logprobs alternatives
  FinishReason finish = FinishReason::None;
  // Set instead of a token: the sequence's replica was lost with it (no token, no finish).
  std::optional<Error> lost;
};

// Speculative decoding: sequence steps that carried guesses, the guesses, those accepted, and
// those accepted at each guess position (the first guess, the second, ...).
struct SpecDecodeStats {
  int64_t drafts = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  std::vector<int64_t> accepted_per_position;

  // Tokens a sequence step with guesses gave on average (accepted guesses plus the model's own).
  double mean_accepted_length() const {
    return drafts ? 1.0 + double(accepted_tokens) / double(drafts) : 0.0;
  }
  void add(const SpecDecodeStats& o) {
    drafts += o.drafts;
    draft_tokens += o.draft_tokens;
    accepted_tokens += o.accepted_tokens;
    auto& per = accepted_per_position;
    per.resize(std::max(per.size(), o.accepted_per_position.size()));
    for (size_t i = 0; i < o.accepted_per_position.size(); ++i)
      per[i] += o.accepted_per_position[i];
  }
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t computed_tokens = 0;  // tokens run through the model (recomputed ones included)
  int64_t cached_tokens = 0;    // tokens served from the prefix cache instead
  int64_t generated = 0;        // tokens sampled
  int64_t preemptions = 0;
  int64_t peak_blocks = 0;  // most KV blocks in use by running sequences at once
  int64_t peak_running = 0;
  int64_t peak_in_flight = 0;  // most steps in flight at once (pipeline micro-batches)
  SpecDecodeStats spec;
};

// One data-parallel replica's share of the work, for /metrics and the stats reply.
struct ReplicaLoad {
  int64_t waiting = 0;    // sequences placed on it, not yet running
  int64_t running = 0;    // sequences in its running batch
  int64_t generated = 0;  // tokens it sampled
  std::string lost;       // why it was lost (a job goes on with the others); empty while up
};

class SequenceScheduler {
 public:
  virtual ~SequenceScheduler() = default;
  // Queues a sequence and returns its id (unique in this scheduler). Raises PromptTooLong when
  // its prompt plus max_tokens cannot fit max_model_len or the whole KV cache, SamplingInvalid
  // for max_tokens < 1.
  virtual int64_t add(SequenceSpec spec) = 0;
  // Runs work and returns the tokens it sampled (nothing when idle).
  virtual std::vector<TokenEvent> step() = 0;
  // Completes every step in flight without starting new ones (before a mesh-wide collective).
  virtual std::vector<TokenEvent> drain() = 0;
  // Ends a sequence, whatever its state: at once, or when its step in flight comes back, which
  // then gives no token for it.
  virtual void finish(int64_t id) = 0;
  // Lets the last stage drop the state of sequences finished since the last step. Idle only.
  virtual void flush_finished() = 0;

  virtual bool idle() const = 0;
  virtual size_t num_waiting() const = 0;
  virtual size_t num_running() const = 0;
  virtual const Sequence* find(int64_t id) const = 0;
  virtual const SchedulerStats& stats() const = 0;
  virtual const SchedulerConfig& config() const = 0;
  virtual int64_t kv_blocks_in_use() const = 0;
  virtual int64_t kv_blocks_total() const = 0;
  // One entry per data-parallel replica (one for a single mesh).
  virtual std::vector<ReplicaLoad> replica_loads() const = 0;
};

}  // namespace qmpi
