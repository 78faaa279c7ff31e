#include "engine/replica_scheduler.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/errors.h"

namespace qmpi {

ReplicaScheduler::ReplicaScheduler(const std::vector<StepRunner*>& runners,
                                   const std::vector<BlockManager*>& blocks,
                                   const SchedulerConfig& cfg, double keep_alive_s)
    : cfg_(cfg),
      keep_alive_on_(keep_alive_s > 0),
      keep_alive_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::max(keep_alive_s, 0.0)))) {
  if (runners.empty() || runners.size() != blocks.size())
    raise(Err::Internal, "replica scheduler with " + std::to_string(runners.size()) +
                             " runners and " + std::to_string(blocks.size()) + " block tables");
  const auto n = int64_t(runners.size());
  for (size_t r = 0; r < runners.size(); ++r) {
    scheds_.push_back(std::make_unique<Scheduler>(*runners[r], *blocks[r], cfg));
    scheds_.back()->number_ids(int64_t(r) + 1, n);  // replica_of() inverts this
  }
  last_step_.assign(scheds_.size(), Clock::now());
  lost_.assign(scheds_.size(), {});
}

template <class F>
void ReplicaScheduler::guarded(int r, std::vector<TokenEvent>& events, F&& f) {
  if (r == 0) return f();  // rank 0's own replica: its loss ends the job
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != Err::CommTimeout) throw;
    lose(r, e, events);
  }
}

void ReplicaScheduler::lose(int r, const Error& e, std::vector<TokenEvent>& events) {
  std::vector<int64_t> ids = scheds_[size_t(r)]->abandon();
  lost_[size_t(r)] = e.message();
  spdlog::error("replica {} lost, {} unfinished sequences on it; the other replicas go on: {}", r,
                ids.size(), e.message());
  const Error lost(Err::CommTimeout,
                   "data-parallel replica " + std::to_string(r) +
                       " was lost while it held this request: " + e.message(),
                   e.fix());
  for (int64_t id : ids) {
    TokenEvent ev;
    ev.seq = id;
    ev.lost = lost;
    events.push_back(std::move(ev));
  }
}

int ReplicaScheduler::pick(const std::vector<int32_t>& prompt) const {
  std::vector<int64_t> load;
  for (int r = 0; r < replicas(); ++r)
    load.push_back(up(r) ? scheds_[size_t(r)]->load_tokens() : INT64_MAX);
  const auto least = int(std::min_element(load.begin(), load.end()) - load.begin());
  if (!cfg_.prefix_caching) return least;
  // A replica that already holds the prompt's first block saves computing it, worth up to one
  // step's tokens of extra queue.
  int best = -1;
  for (int r = 0; r < replicas(); ++r)
    if (up(r) && load[size_t(r)] <= load[size_t(least)] + cfg_.max_batched_tokens &&
        scheds_[size_t(r)]->holds_prefix(prompt) &&
        (best < 0 || load[size_t(r)] < load[size_t(best)]))
      best = r;
  return best >= 0 ? best : least;
}

int64_t ReplicaScheduler::add(SequenceSpec spec) {
  const int r = pick(spec.prompt);
  return scheds_[size_t(r)]->add(std::move(spec));
}

std::vector<TokenEvent> ReplicaScheduler::step() {
  std::vector<TokenEvent> events = std::exchange(lost_events_, {});
  if (idle()) return events;
  // Rank 0 computes its own replica's part of a step inside submit, so the others' plans go
  // out first and they work meanwhile.
  for (int r = replicas() - 1; r >= 0; --r)
    if (!scheds_[size_t(r)]->idle()) guarded(r, events, [&] { scheds_[size_t(r)]->fill(); });
  const Clock::time_point now = Clock::now();
  for (int r = 0; r < replicas(); ++r) {
    Scheduler& s = *scheds_[size_t(r)];
    if (s.in_flight() == 0) {
      if (!s.idle())
        raise(Err::Internal, "replica " + std::to_string(r) + ": the scheduler found nothing " +
                                 "to run with " + std::to_string(s.num_running()) +
                                 " running and " + std::to_string(s.num_waiting()) +
                                 " waiting sequences");
      continue;
    }
    guarded(r, events, [&] {
      std::vector<TokenEvent> more = s.complete_oldest();
      events.insert(events.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
    });
    last_step_[size_t(r)] = now;
  }
  keep_idle_replicas_alive(events);
  return events;
}

void ReplicaScheduler::keep_idle_replicas_alive(std::vector<TokenEvent>& events) {
  if (!keep_alive_on_) return;
  const Clock::time_point now = Clock::now();
  for (int r = 0; r < replicas(); ++r) {
    Scheduler& s = *scheds_[size_t(r)];
    if (up(r) && s.idle() && s.in_flight() == 0 && now - last_step_[size_t(r)] >= keep_alive_) {
      guarded(r, events, [&] { s.keep_alive(); });
      last_step_[size_t(r)] = now;
    }
  }
}

std::vector<TokenEvent> ReplicaScheduler::drain() {
  std::vector<TokenEvent> events = std::exchange(lost_events_, {});
  for (int r = 0; r < replicas(); ++r)
    guarded(r, events, [&] {
      std::vector<TokenEvent> more = scheds_[size_t(r)]->drain();
      events.insert(events.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
    });
  return events;
}

void ReplicaScheduler::finish(int64_t id) {
  scheds_[size_t(replica_of(id))]->finish(id);
}

void ReplicaScheduler::flush_finished() {
  for (int r = 0; r < replicas(); ++r)
    guarded(r, lost_events_, [&] { scheds_[size_t(r)]->flush_finished(); });
}

bool ReplicaScheduler::idle() const {
  return lost_events_.empty() &&
         std::all_of(scheds_.begin(), scheds_.end(), [](const auto& s) { return s->idle(); });
}

size_t ReplicaScheduler::num_waiting() const {
  size_t n = 0;
  for (const auto& s : scheds_) n += s->num_waiting();
  return n;
}

size_t ReplicaScheduler::num_running() const {
  size_t n = 0;
  for (const auto& s : scheds_) n += s->num_running();
  return n;
}

const Sequence* ReplicaScheduler::find(int64_t id) const {
  return id < 1 ? nullptr : scheds_[size_t(replica_of(id))]->find(id);
}

// Counters are summed; so are the peaks, which makes them an upper bound of the whole job's.
const SchedulerStats& ReplicaScheduler::stats() const {
  stats_ = {};
  for (const auto& s : scheds_) {
    const SchedulerStats& o = s->stats();
    stats_.steps += o.steps;
    stats_.computed_tokens += o.computed_tokens;
    stats_.cached_tokens += o.cached_tokens;
    stats_.generated += o.generated;
    stats_.preemptions += o.preemptions;
    stats_.peak_blocks += o.peak_blocks;
    stats_.peak_running += o.peak_running;
    stats_.peak_in_flight += o.peak_in_flight;
    stats_.spec.add(o.spec);
  }
  return stats_;
}

std::vector<ReplicaLoad> ReplicaScheduler::replica_loads() const {
  std::vector<ReplicaLoad> loads;
  for (int r = 0; r < replicas(); ++r) {
    loads.push_back(scheds_[size_t(r)]->replica_loads().front());
    loads.back().lost = lost_[size_t(r)];
  }
  return loads;
}

void ReplicaScheduler::log_summary() const {
  if (replicas() < 2) return;
  for (int r = 0; r < replicas(); ++r) {
    const SchedulerStats& s = scheds_[size_t(r)]->stats();
    spdlog::info("replica {}: {} steps, {} tokens generated, {} preemptions{}", r, s.steps,
                 s.generated, s.preemptions, up(r) ? "" : " (lost)");
  }
}

// The replicas up: a lost one's blocks are neither used nor available.
int64_t ReplicaScheduler::kv_blocks_in_use() const {
  int64_t n = 0;
  for (int r = 0; r < replicas(); ++r)
    if (up(r)) n += scheds_[size_t(r)]->kv_blocks_in_use();
  return n;
}

int64_t ReplicaScheduler::kv_blocks_total() const {
  int64_t n = 0;
  for (int r = 0; r < replicas(); ++r)
    if (up(r)) n += scheds_[size_t(r)]->kv_blocks_total();
  return n;
}

int replica_loss_exit_code(const SequenceScheduler& sched) {
  const std::vector<ReplicaLoad> loads = sched.replica_loads();
  std::string lost;
  for (size_t r = 0; r < loads.size(); ++r)
    if (!loads[r].lost.empty())
      lost += (lost.empty() ? "" : "; ") + std::string("replica ") + std::to_string(r) +
              " was lost: " + loads[r].lost;
  if (lost.empty()) return 0;
  const Error e(Err::ReplicaLost, "the job finished on the other replicas of " +
                                      std::to_string(loads.size()) + ", but " + lost);
  std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
  return e.exit_code();
}

}  // namespace qmpi
