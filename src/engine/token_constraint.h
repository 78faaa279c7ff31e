// The per-sequence logits processor seam: what a constrained sequence (a JSON schema, regex,
// grammar, tool call) may sample next. The automaton lives on rank 0 with the sequence; each
// step rank 0 asks it for the allowed ids of the next position, the bitset travels to the
// sampling rank in the sequence's StepSeq::allowed, and the sampled token comes back to
// advance it. Rank 0 sees every sampled token and plans every replica's steps, so this works
// at every layout, with pipelined micro-batches and --dp. Implemented above the engine
// (src/constrain/), which knows tokenizers and grammars.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace qmpi {

// One sequence's position in its constraint.
class ConstraintState {
 public:
  virtual ~ConstraintState() = default;
  // The ids the next token may take: bit (id % 64) of word (id / 64); empty = any id.
  virtual std::vector<uint64_t> allowed() = 0;
  // The sequence sampled `token` (which allowed() admitted).
  virtual void advance(int32_t token) = 0;
};

// A compiled constraint, shared by the sequences of a request (n > 1, a restart after a lost
// replica): each starts its own state.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<ConstraintState> start() const = 0;
};

}  // namespace qmpi
