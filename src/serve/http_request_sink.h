// The queue between the engine thread and one HTTP request's connection. deliver() (engine
// thread) queues the event and, when the queue was empty, calls `wake` once; the connection then
// take()s everything on its own thread. It never blocks the engine: past `cap` bytes queued
// and not taken, it stops queueing and says so (overflowed), and the connection ends the
// request with client-too-slow.
#pragma once
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

#include "serve/serve_event.h"

namespace qmpi {

class HttpRequestSink final : public EventSink {
 public:
  // `stream`: keep deltas (a response that is not streamed needs only the final or error).
  // `wake` must be cheap and must not block (it posts to the connection's strand).
  HttpRequestSink(bool stream, size_t cap, std::function<void()> wake);

  void deliver(ServeEvent ev) override;
  // The events queued so far, oldest first; the next deliver() wakes again.
  std::deque<ServeEvent> take();
  bool overflowed() const;

  static size_t event_bytes(const ServeEvent& e);

 private:
  const bool stream_;
  const size_t cap_;
  const std::function<void()> wake_;
  mutable std::mutex mu_;
  std::deque<ServeEvent> events_;
  size_t bytes_ = 0;
  bool overflowed_ = false;
  bool woken_ = false;  // a wake is on its way and take() has not run since
};

}  // namespace qmpi
