// Runs steps on the whole mesh. Rank 0 calls step() with a plan; every other rank sits in
// serve() until rank 0 shuts the mesh down. Within a step: the plan is broadcast, the first
// stage embeds, hidden states go stage to stage (TP rank i -> TP rank i), the last stage
// computes logits and samples, and its TP rank 0 returns the results to rank 0.
// All communication happens on the calling (main) thread.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "dist/comm.h"
#include "engine/kv_cache.h"
#include "engine/step_plan.h"
#include "model/qwen2.h"

namespace qmpi {

struct MeshPosition {
  int rank = 0;
  int tp_rank = 0;
  int stage = 0;
  int pp = 1;
  int tp = 1;
  int prev_stage_rank = -1;  // world rank of the same TP rank on the previous stage
  int next_stage_rank = -1;
  int result_rank = 0;  // world rank of TP rank 0 on the last stage
};

struct StepTimes {
  double total_s = 0.0;
  double comm_s = 0.0;  // world (plan, stage-to-stage, results) plus TP collectives
  int64_t steps = 0;
};

class Executor {
 public:
  // `world` and `tp` are the comms the model was built with (TimedComm wrappers).
  Executor(const MeshPosition& pos, Comm& world, Comm& tp, Backend& backend, Qwen2Model& model,
           KvCache& cache);

  StepResult step(const StepPlan& plan);  // rank 0 only
  void serve();                           // ranks other than 0
  void shutdown();                        // rank 0: ends every serve()
  // Rank 0: asks every rank whether it saw SIGINT/SIGTERM (stop_requested_anywhere, joined by
  // every serve()), so that all ranks agree at the same point. A server polls it between steps.
  bool poll_stop();

  // Rank 0: token ids the sampler may pick (the tokenizer's size; embedding rows past it have
  // no text). Sent with every step. 0 = every row.
  void set_valid_vocab(int64_t n) { valid_vocab_ = n; }
  const StepTimes& times() const { return times_; }
  void reset_times() { times_ = {}; }
  int64_t vocab_size() const;

 private:
  StepResult execute(const StepPlan& plan);
  void broadcast_plan(StepPlan* plan);
  StepResult finish_on_last_stage(const StepPlan& plan, const BatchInput& batch,
                                  const float* hidden);
  void send_hidden(const float* hidden, size_t bytes);
  void recv_hidden(float* hidden, size_t bytes);
  void send_result(const StepResult& r);
  StepResult recv_result(const StepPlan& plan);

  MeshPosition pos_;
  Comm& world_;
  Comm& tp_;
  Backend& be_;
  Qwen2Model& model_;
  KvCache& cache_;
  int64_t valid_vocab_ = 0;
  Buffer hidden_;
  std::vector<uint8_t> staging_;
  std::unordered_map<int64_t, std::vector<int32_t>> history_;  // last stage: tokens per sequence
  StepTimes times_;
};

}  // namespace qmpi
