// Data-parallel replicas behind one queue, on rank 0: one Scheduler per replica (its own KV
// block table and runner), a sequence placed on the replica with the least work (queued and
// running tokens, Scheduler::load_tokens), or on one already holding its first KV block when
// that one is not much busier (the other choices of a request, a shared system prompt).
//
// Steps are interleaved: each step() first fills every busy replica's pipeline (the other
// replicas first, whose plans go out without waiting, then rank 0's own, which rank 0 computes
// itself while they compute theirs), then completes the oldest step of each. The replicas thus
// advance in lock step, each on its own sequences; a sequence never moves between replicas, so
// its tokens are those of a single-replica run (sampling is seeded per request and token).
//
// A replica with no work gets no steps, only an empty one now and then (keep_alive_s), so that
// its ranks, waiting for a plan under --comm-timeout, hear from rank 0.
//
// A replica other than rank 0's that stops answering (its runner raises CommTimeout, which the
// world comm does only when the launcher recovers from lost ranks: replica_survival.h) is lost:
// logged by name, never given work again, and each of its unfinished sequences comes back once
// as a TokenEvent whose `lost` holds the error (the pipeline fails or re-queues its request).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace qmpi {

class ReplicaScheduler final : public SequenceScheduler {
 public:
  // runners[r] and blocks[r] step replica r (as many of each, at least one). keep_alive_s <= 0:
  // no keep-alive steps.
  ReplicaScheduler(const std::vector<StepRunner*>& runners,
                   const std::vector<BlockManager*>& blocks, const SchedulerConfig& cfg,
                   double keep_alive_s);

  int64_t add(SequenceSpec spec) override;
  std::vector<TokenEvent> step() override;
  std::vector<TokenEvent> drain() override;
  void finish(int64_t id) override;
  void flush_finished() override;

  bool idle() const override;
  size_t num_waiting() const override;
  size_t num_running() const override;
  const Sequence* find(int64_t id) const override;
  const SchedulerStats& stats() const override;
  const SchedulerConfig& config() const override { return cfg_; }
  int64_t kv_blocks_in_use() const override;
  int64_t kv_blocks_total() const override;
  std::vector<ReplicaLoad> replica_loads() const override;

  int replicas() const { return int(scheds_.size()); }
  int replica_of(int64_t id) const { return int((id - 1) % int64_t(scheds_.size())); }
  const Scheduler& replica(int r) const { return *scheds_.at(size_t(r)); }
  // The replica a sequence with this prompt would go to now.
  int pick(const std::vector<int32_t>& prompt) const;
  // With more than one replica: one log line per replica, "replica 1: 40 steps, 212 tokens
  // generated", at the end of a job.
  void log_summary() const;

 private:
  using Clock = std::chrono::steady_clock;
  void keep_idle_replicas_alive(std::vector<TokenEvent>& events);
  // Runs `f` (something that talks to replica r); a CommTimeout from it loses the replica, its
  // sequences' events going to `events`.
  template <class F>
  void guarded(int r, std::vector<TokenEvent>& events, F&& f);
  void lose(int r, const Error& e, std::vector<TokenEvent>& events);
  bool up(int r) const { return lost_[size_t(r)].empty(); }

  SchedulerConfig cfg_;
  std::vector<std::unique_ptr<Scheduler>> scheds_;
  std::vector<Clock::time_point> last_step_;  // per replica: when it last ran a step
  std::vector<std::string> lost_;             // per replica: why it was lost; empty while up
  std::vector<TokenEvent> lost_events_;       // from losses outside step(), for the next one
  bool keep_alive_on_;
  Clock::duration keep_alive_;    // may round to zero: then every step pings the idle replicas
  mutable SchedulerStats stats_;  // the replicas' summed, refreshed by stats()
};

// The exit code of a batch or serve job that finished: 0, or QM414's (printed, naming each
// replica lost on the way and why) when it ended on fewer replicas than it started with.
int replica_loss_exit_code(const SequenceScheduler& sched);

}  // namespace qmpi
