// Who guesses a decoding sequence's next tokens on rank 0 (speculative decoding). The guesses
// cost nothing to be wrong: the target model scores them all in one step, keeps the prefix it
// agrees with and adds its own next token (last_stage.h), so the output is the same as without
// them; right guesses give several tokens for one read of the weights.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "engine/speculative_config.h"

namespace qmpi {

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Up to `max` tokens to follow `s`'s prompt and output (none is a fine answer). Not const: a
  // draft model keeps state per sequence (draft_model_proposer.h).
  virtual std::vector<int32_t> propose(const Sequence& s, int64_t max) = 0;
  // Sequence `id` has finished: drop whatever was kept for it.
  virtual void forget(int64_t /*id*/) {}
};

// Prompt lookup: the longest suffix of `context` of between min_n and max_n tokens that also
// occurs earlier in it; the up to `max` tokens after its latest earlier occurrence.
std::vector<int32_t> prompt_lookup(std::span<const int32_t> context, int32_t min_n, int32_t max_n,
                                   int64_t max);

class NgramProposer final : public DraftProposer {
 public:
  explicit NgramProposer(const SpeculativeConfig& c) : c_(c) {}
  std::vector<int32_t> propose(const Sequence& s, int64_t max) override;

 private:
  SpeculativeConfig c_;
};

// Prompt lookup as `c` names it; null when speculation is off or uses a draft model (which the
// Engine builds: it needs the backend).
std::shared_ptr<DraftProposer> make_proposer(const SpeculativeConfig& c);

}  // namespace qmpi
