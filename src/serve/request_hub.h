// The one place the fronts (broker and HTTP threads) and the engine loop (rank 0's MPI thread)
// meet: fronts submit checked, tokenized requests and cancels; the engine loop takes them
// between steps and publishes a snapshot of its state for health and stats. Nothing else is
// shared between those threads.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/sequence_scheduler.h"
#include "requests/request_parser.h"
#include "serve/serve_event.h"

namespace qmpi {

enum class Health : uint8_t { Loading, Ready, Draining };
const char* health_name(Health h);  // "loading", "ready", "draining"

// A request for the engine loop, checked and tokenized by its front.
struct ServeRequest {
  uint64_t ticket = 0;    // set by submit(); the engine's name for the request
  std::string client_id;  // the id the client gave (ZMQ) or the response id (HTTP)
  Request req;
  std::vector<int32_t> prompt;
  std::chrono::steady_clock::time_point arrival;
  std::shared_ptr<EventSink> sink;
};

// The engine loop's state as of its last iteration.
struct EngineSnapshot {
  Health health = Health::Loading;
  int64_t waiting = 0;  // sequences queued in the scheduler, not yet running
  int64_t running = 0;  // sequences in the running batch
  // Sequence slots not taken by the running batch (--max-num-seqs on each live replica): the
  // sequences waiting to fill them are not queued beyond capacity.
  int64_t free_seqs = 0;
  int64_t requests = 0;  // requests admitted and not finished
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t max_model_len = 0;  // 0 until the engine is up
  SpecDecodeStats spec;
  std::vector<ReplicaLoad> replicas;  // per data-parallel replica, in replica order
};

class RequestHub {
 public:
  // `max_queue`: requests waiting to start (submitted, or queued in the scheduler) beyond the
  // engine's free sequence slots, past which submit() answers Busy.
  explicit RequestHub(int64_t max_queue);

  // Fronts. submit() raises Busy when the queue is full or the server is draining, and
  // returns the request's ticket. cancel() ends a request with a "cancelled" final; tickets
  // that already finished are ignored.
  uint64_t submit(ServeRequest request);
  void cancel(uint64_t ticket);
  EngineSnapshot snapshot() const;
  int64_t queued() const;  // submitted but not yet taken by the engine loop

  // The job is about to end (the comm watchdog aborts it): every request not finished yet gets
  // `error`, from whatever thread calls this, and submit() refuses from here on.
  void fail_all(const Error& error);

  // Engine loop.
  struct Work {
    std::vector<ServeRequest> requests;
    std::vector<uint64_t> cancels;
    bool empty() const { return requests.empty() && cancels.empty(); }
  };
  // Everything submitted so far; waits up to `wait` when there is nothing.
  Work take(std::chrono::microseconds wait);
  void publish(const EngineSnapshot& snapshot);
  // The request's last event (final or error) was delivered.
  void finished(uint64_t ticket);
  // Draining: submit() refuses from here on (the engine finishes what it has).
  void set_health(Health h);

 private:
  const int64_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ServeRequest> requests_;
  std::vector<uint64_t> cancels_;
  std::unordered_map<uint64_t, std::weak_ptr<EventSink>> live_;  // submitted, not finished
  EngineSnapshot snap_;
  uint64_t next_ticket_ = 1;
};

}  // namespace qmpi
