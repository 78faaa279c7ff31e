// The last pipeline stage's own work, after the model has produced a step's logits: pick each
// sequence's rows, keep its penalty history (the tokens it has been fed so far), sample next to
// the logits and build the step's result; with guessed tokens (StepSeq::draft), keep those the
// samples agree with (speculative decoding). Holds no comm and no model, so it is tested without
// MPI (tests/unit/engine/last_stage_test.cpp). Only TP rank 0 of the last stage runs it.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/step_plan.h"

namespace qmpi {

class LastStage {
 public:
  // Runs task(0) .. task(count - 1), which touch disjoint data, in any order or side by side
  // (Backend::run_tasks); by default one after the other.
  using TaskRunner = std::function<void(int64_t count, const std::function<void(int64_t)>& task)>;
  static void in_order(int64_t count, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < count; ++i) task(i);
  }

  // `logits` holds the plan's logit rows, [rows, vocab], in make_batch's order (every new token
  // of an all_logits sequence, the last draft + 1 of a sampling sequence); it is modified by the
  // sampler. The sampling sequences' rows are sampled by `run`'s tasks, one per sequence.
  StepResult finish_step(const StepPlan& plan, std::span<float> logits, int64_t vocab,
                         const TaskRunner& run = in_order);
  // Drops the history of sequences that have finished (a plan's `finished`).
  void forget(const std::vector<int64_t>& finished);

  size_t live_sequences() const { return history_.size(); }

 private:
  std::unordered_map<int64_t, std::vector<int32_t>> history_;  // tokens fed, per sequence
};

}  // namespace qmpi
