#include "serve/request_hub.h"

#include <string>

#include "core/errors.h"

namespace qmpi {

const char* health_name(Health h) {
  switch (h) {
    case Health::Loading:
      return "loading";
    case Health::Ready:
      return "ready";
    case Health::Draining:
      return "draining";
  }
  return "unknown";
}

RequestHub::RequestHub(int64_t max_queue) : max_queue_(max_queue) {}

uint64_t RequestHub::submit(ServeRequest request) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mu_);
    if (snap_.health == Health::Draining)
      raise(Err::Busy, "the server is shutting down (SIGTERM) and takes no new requests",
            "Send the request to another server, or retry once this one is back.");
    // A burst waits for the scheduler's next step to start it; only what the free slots will
    // not take is queued.
    const int64_t waiting = int64_t(requests_.size()) + snap_.waiting - snap_.free_seqs;
    if (waiting >= max_queue_)
      raise(Err::Busy, std::to_string(waiting) +
                           " requests are waiting for a free sequence slot, as many as "
                           "--max-queue " +
                           std::to_string(max_queue_) + " allows");
    ticket = next_ticket_++;
    request.ticket = ticket;
    live_[ticket] = request.sink;
    requests_.push_back(std::move(request));
  }
  cv_.notify_one();
  return ticket;
}

void RequestHub::cancel(uint64_t ticket) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(ticket);
  }
  cv_.notify_one();
}

EngineSnapshot RequestHub::snapshot() const {
  std::lock_guard lock(mu_);
  return snap_;
}

int64_t RequestHub::queued() const {
  std::lock_guard lock(mu_);
  return int64_t(requests_.size());
}

RequestHub::Work RequestHub::take(std::chrono::microseconds wait) {
  Work w;
  std::unique_lock lock(mu_);
  if (requests_.empty() && cancels_.empty() && wait.count() > 0)
    cv_.wait_for(lock, wait, [&] { return !requests_.empty() || !cancels_.empty(); });
  w.requests.assign(std::make_move_iterator(requests_.begin()),
                    std::make_move_iterator(requests_.end()));
  requests_.clear();
  w.cancels.swap(cancels_);
  // Counted as waiting until the engine publishes its next snapshot, so a burst cannot slip
  // past --max-queue between take() and publish().
  snap_.waiting += int64_t(w.requests.size());
  return w;
}

void RequestHub::publish(const EngineSnapshot& snapshot) {
  std::lock_guard lock(mu_);
  const Health h = snap_.health;
  snap_ = snapshot;
  snap_.health = h;  // health changes only through set_health
}

void RequestHub::finished(uint64_t ticket) {
  std::lock_guard lock(mu_);
  live_.erase(ticket);
}

void RequestHub::fail_all(const Error& error) {
  std::unordered_map<uint64_t, std::weak_ptr<EventSink>> live;
  {
    std::lock_guard lock(mu_);
    snap_.health = Health::Draining;
    live.swap(live_);
  }
  for (const auto& [ticket, weak] : live)
    if (const auto sink = weak.lock()) {
      ServeEvent ev;
      ev.kind = ServeEvent::Kind::Error;
      ev.error = error;
      sink->deliver(std::move(ev));
    }
}

void RequestHub::set_health(Health h) {
  std::lock_guard lock(mu_);
  snap_.health = h;
}

}  // namespace qmpi
