// Runs steps on the whole mesh. Rank 0 submits plans; every other rank sits in serve() until
// rank 0 shuts the mesh down. A plan travels the pipeline with the hidden states: rank 0 hands
// it to the other TP ranks of the first stage, each rank passes it on to the same TP rank of
// the next stage (then its hidden states), the last stage computes logits and samples, and its
// TP rank 0 returns the results to rank 0. The Executor runs the model on each step; what
// travels is StageLink's (stage_link.h), and sampling with its penalty history is LastStage's
// (last_stage.h).
//
// With PP stages, rank 0 may submit up to depth() plans before collecting the oldest result:
// while the last stage works on micro-batch m, the first works on m + 1, so stages do not idle.
// Every stage runs plans in the order rank 0 submitted them, which keeps each stage's KV cache
// writes in that order too. All communication happens on the calling (main) thread.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/last_stage.h"
#include "engine/stage_link.h"
#include "engine/step_plan.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "parallel/comm.h"

namespace qmpi {

struct StepTimes {
  double total_s = 0.0;
  double comm_s = 0.0;  // world (plans, stage-to-stage, results) plus TP collectives
  int64_t steps = 0;
};

class Executor {
 public:
  // `world` and `tp` are the comms the model was built with (TimedComm wrappers); `replica` is
  // this rank's replica's (Mesh::replica_group), for the stop poll.
  Executor(const MeshPosition& pos, Comm& world, Comm& tp, Comm& replica, Backend& backend,
           DecoderModel& model, KvCache& cache);

  // Rank 0 only. submit() starts a step (rank 0 runs its own stage's part before returning);
  // collect() returns the result of the oldest step submitted and not yet collected.
  void submit(const StepPlan& plan);
  StepResult collect();
  StepResult step(const StepPlan& plan);  // submit + collect
  int depth() const { return pos_.pp; }   // plans worth having in flight at once
  size_t in_flight() const { return in_flight_.size(); }

  void serve();  // ranks other than 0
  // Rank 0: drops the results of its own steps in flight, then ends the serve() of every rank of
  // its replica (the other replicas are ended by their ReplicaRunner::shutdown).
  void shutdown();
  // Rank 0, nothing in flight: asks every rank of its replica whether it saw SIGINT/SIGTERM
  // (stop_requested_anywhere, joined by their serve()), so that they agree at the same point.
  // A server polls it between steps. The other replicas are not asked: one that is lost must
  // not hold the poll up, and launchers signal every rank (mpirun and Slurm forward SIGTERM).
  bool poll_stop();

  // Rank 0: token ids the sampler may pick (the tokenizer's size; embedding rows past it have
  // no text). Sent with every step. 0 = every row.
  void set_valid_vocab(int64_t n) { valid_vocab_ = n; }
  int64_t valid_vocab() const { return valid_vocab_; }
  const MeshPosition& position() const { return pos_; }
  const StepTimes& times() const { return times_; }
  void reset_times() { times_ = {}; }
  int64_t vocab_size() const;

 private:
  void execute(const StepPlan& plan);

  MeshPosition pos_;
  Comm& world_;
  Comm& tp_;
  Comm& replica_;
  Backend& be_;
  DecoderModel& model_;
  KvCache& cache_;
  StageLink link_;
  LastStage last_;  // used on TP rank 0 of the last stage
  int64_t valid_vocab_ = 0;
  Buffer hidden_;
  std::vector<float> logits_;  // the last stage's logits, reused by every step
  // Rank 0: one entry per step submitted and not yet collected; it holds the result when rank 0
  // is the last stage itself (PP = 1), else the result is received at collect().
  std::deque<StepResult> in_flight_;
  StepTimes times_;
};

}  // namespace qmpi
