// One sequence the scheduler runs: what it was asked for, what it has produced, and where its
// KV cache lives. A request with n choices is n sequences.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include "engine/sampling_params.h"
#include "engine/token_constraint.h"

namespace qmpi {

enum class FinishReason : uint8_t {
  None,    // still running
  Stop,    // sampled one of its stop ids (eos, stop_token_ids)
  Length,  // max_tokens or max_model_len reached
};

const char* finish_reason_name(FinishReason r);  // "stop", "length", "" for None

struct SequenceSpec {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  std::vector<int32_t> stop_ids;                      // finish after sampling one of these
  std::shared_ptr<const TokenConstraint> constraint;  // null: unconstrained
  int32_t adapter = -1;  // LoRA adapter index (model/lora_config.h); -1: the base model
};

enum class SeqState : uint8_t { Waiting, Running };

struct Sequence {
  int64_t id = 0;
  SequenceSpec spec;
  std::vector<int32_t> output;
  SeqState state = SeqState::Waiting;
  int64_t computed = 0;          // tokens whose KV is in the cache
  std::vector<int32_t> blocks;   // block table (shared prefix blocks first)
  std::vector<uint64_t> hashes;  // content hash of each full block of computed tokens
  uint64_t admitted = 0;         // admission counter: the newest is preempted first
  bool fed = false;              // has run a step since its (re)admission
  bool in_flight = false;        // in a step submitted and not yet completed
  bool cancelled = false;        // finish() came while in flight: retire when it returns
  int64_t preemptions = 0;
  // Where its output is in spec.constraint. It follows the output tokens, which preemption
  // keeps, so a recomputed sequence carries on where it was.
  std::unique_ptr<ConstraintState> constraint;

  int64_t total() const { return int64_t(spec.prompt.size() + output.size()); }
  // Tokens [begin, end) of prompt followed by output.
  std::vector<int32_t> tokens(int64_t begin, int64_t end) const {
    std::vector<int32_t> t;
    t.reserve(size_t(end - begin));
    const auto n = int64_t(spec.prompt.size());
    for (int64_t i = begin; i < end; ++i)
      t.push_back(i < n ? spec.prompt[size_t(i)] : output[size_t(i - n)]);
    return t;
  }
};

}  // namespace qmpi
