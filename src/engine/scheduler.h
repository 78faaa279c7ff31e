// Continuous batching on rank 0. Sequences wait in a queue; every step the running ones advance
// (decodes first, then prompt chunks) and waiting ones join while --max-num-seqs and the
// --max-batched-tokens budget allow. A prompt longer than the budget is prefilled in chunks over
// several steps, so decodes keep going. KV blocks are taken as tokens arrive; when they run
// out, the most recently admitted sequence is preempted by recompute (its blocks are freed and
// it waits again with its prompt plus what it generated; the same sample indices give the same
// tokens). The oldest running sequence is never preempted for a younger one, so every sequence
// finishes: no deadlock, whatever the cache size, as long as each one fits the cache alone
// (add() refuses those that do not).
//
// With a pipelined runner (PP stages), up to depth() micro-batches are in flight: each is a
// step over sequences that are in no other one, the running sequences split evenly between
// them. A sequence in flight is never preempted (its blocks are being written); one that must
// grow while only in-flight sequences could make room waits for them to come back.
//
// With --speculative-config, a decoding sequence may carry guessed tokens after its last one
// (draft_proposer.h), when the step's token budget and free blocks allow (a guess never preempts
// anything). The step returns the guesses the model agreed with plus one token of its own; the
// cache keeps the accepted ones: `computed` counts only them, the blocks past them go back, and
// only blocks full of accepted tokens are ever published to the prefix cache.
//
// The scheduler talks to the mesh through StepRunner, so tests can run it against a fake.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/block_pool.h"
#include "engine/draft_proposer.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "engine/sequence_scheduler.h"
#include "engine/step_plan.h"

namespace qmpi {

class Executor;

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // One step, start to finish.
  virtual StepResult run(const StepPlan& plan) = 0;
  // A pipelined runner overrides these: submit() starts a step, collect() returns the oldest
  // submitted step's result, and up to depth() steps may be in flight. The default runs each
  // step when it is submitted.
  virtual int depth() const { return 1; }
  virtual void submit(const StepPlan& plan) { done_.push_back(run(plan)); }
  virtual StepResult collect();
  // The mesh behind it is lost (a data-parallel replica): forget what is in flight without
  // waiting for it. Only a replica's runner has anything to forget.
  virtual void abandon() {}

 private:
  std::deque<StepResult> done_;
};

// The real mesh: steps go to the Executor, pipelined over its PP stages.
class ExecutorRunner final : public StepRunner {
 public:
  explicit ExecutorRunner(Executor& ex) : ex_(ex) {}
  StepResult run(const StepPlan& plan) override;
  int depth() const override;
  void submit(const StepPlan& plan) override;
  StepResult collect() override;

 private:
  Executor& ex_;
};

class Scheduler final : public SequenceScheduler {
 public:
  // `drafts` guesses tokens (tests); by default the one cfg.speculative names, if any (its draft
  // model is cfg.draft_model).
  Scheduler(StepRunner& runner, BlockManager& blocks, const SchedulerConfig& cfg,
            std::shared_ptr<DraftProposer> drafts = nullptr);

  // Queues a sequence and returns its id. Raises PromptTooLong when its prompt plus max_tokens
  // cannot fit max_model_len or the whole KV cache, SamplingInvalid for max_tokens < 1.
  int64_t add(SequenceSpec spec) override;
  // Fills the pipeline with steps, then completes the oldest one in flight and returns the
  // tokens it sampled, in plan order (nothing when idle).
  std::vector<TokenEvent> step() override;
  // The two halves of step(), for a driver of several schedulers (ReplicaScheduler): fill()
  // submits steps until depth() are in flight or nothing more can run; complete_oldest()
  // completes the oldest step in flight (there must be one).
  void fill();
  std::vector<TokenEvent> complete_oldest();
  // Completes every step in flight without starting new ones (before a mesh-wide collective).
  std::vector<TokenEvent> drain() override;
  // Ends a sequence, whatever its state (a stop string matched, its request was dropped): at
  // once, or when its step in flight comes back, which then gives no token for it.
  void finish(int64_t id) override;
  // Lets the last stage drop the state of sequences finished since the last step. Idle only.
  void flush_finished() override;
  // Idle only: one empty step (carrying the finished list), so that a mesh that has had no work
  // for a while hears from rank 0 before its --comm-timeout.
  void keep_alive();
  // The mesh is gone (a lost replica): forgets every sequence and step in flight without
  // talking to it (StepRunner::abandon), and returns the ids of the sequences not finished.
  std::vector<int64_t> abandon();

  // Ids first, first + stride, first + 2 stride, ...: schedulers side by side (one per
  // replica) number their sequences apart. Before the first add().
  void number_ids(int64_t first, int64_t stride);
  // Work queued and running, in tokens: what is left to compute of each sequence's prompt and
  // output so far, plus the outputs still to come (max_tokens). A replica's load.
  int64_t load_tokens() const;
  // Whether a live sequence starts with the same first KV block as `prompt` (a shared system
  // prompt, the other choices of a request): sharing its blocks saves computing them.
  bool holds_prefix(const std::vector<int32_t>& prompt) const;

  bool idle() const override { return waiting_.empty() && running_.empty(); }
  size_t num_waiting() const override { return waiting_.size(); }
  size_t num_running() const override { return running_.size(); }
  const Sequence* find(int64_t id) const override;
  const SchedulerStats& stats() const override { return stats_; }
  std::vector<ReplicaLoad> replica_loads() const override {
    return {{int64_t(num_waiting()), int64_t(num_running()), stats_.generated, {}}};
  }
  const BlockPool& pool() const { return pool_; }
  const SchedulerConfig& config() const override { return cfg_; }
  int64_t kv_blocks_in_use() const override { return pool_.in_use(); }
  int64_t kv_blocks_total() const override { return pool_.num_blocks(); }
  size_t in_flight() const { return in_flight_.size(); }

 private:
  struct Scheduled {
    Sequence* seq;
    int64_t tokens;              // new tokens this step, guesses included
    std::vector<int32_t> draft;  // the guesses, after the sequence's last token
  };
  struct InFlightStep {
    std::vector<Scheduled> planned;
    std::vector<bool> sample;         // per planned sequence: a token comes back
    size_t samples = 0;               // sequences that sample
    std::vector<uint64_t> computing;  // first-block keys this step computes
  };

  std::vector<Scheduled> schedule(std::vector<uint64_t>& computing);
  void submit(std::vector<Scheduled> planned, std::vector<uint64_t> computing);
  bool grow(Sequence& s, int64_t tokens, std::vector<Scheduled>& planned);
  void preempt(Sequence& s, std::vector<Scheduled>& planned);
  bool admit(std::vector<Scheduled>& planned, int64_t budget, std::vector<uint64_t>& computing);
  void add_drafts(std::vector<Scheduled>& planned, int64_t budget);
  void count_drafts(size_t drafted, size_t accepted);
  int64_t depth() const;  // steps to keep in flight
  int64_t seqs_per_step() const;
  StepSeq to_step(const Scheduled& sc) const;
  void publish_full_blocks(Sequence& s);
  void retire(Sequence& s);

  StepRunner& runner_;
  BlockPool pool_;
  SchedulerConfig cfg_;
  std::shared_ptr<DraftProposer> drafts_;  // shared by the replicas' schedulers (ids differ)
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  std::vector<int64_t> finished_;   // for the next plan
  std::deque<InFlightStep> in_flight_;
  std::unordered_set<uint64_t> computing_;  // first-block keys of steps in flight or planned
  int64_t next_id_ = 1;
  int64_t id_stride_ = 1;
  uint64_t admissions_ = 0;
  SchedulerStats stats_;
};

}  // namespace qmpi
