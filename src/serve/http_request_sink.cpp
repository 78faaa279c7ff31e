#include "serve/http_request_sink.h"

#include <utility>

namespace qmpi {

HttpRequestSink::HttpRequestSink(bool stream, size_t cap, std::function<void()> wake)
    : stream_(stream), cap_(cap), wake_(std::move(wake)) {}

size_t HttpRequestSink::event_bytes(const ServeEvent& e) {
  return 64 + e.text.size() + 4 * e.token_ids.size();
}

void HttpRequestSink::deliver(ServeEvent ev) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (ev.kind == ServeEvent::Kind::Delta && !stream_) return;  // the final has the text
    const bool last = ev.kind == ServeEvent::Kind::Final || ev.kind == ServeEvent::Kind::Error;
    // Once over the bound only the last event is kept: the connection needs to know the request
    // ended (it was cancelled for being slow), not its text.
    if (overflowed_ && !last) return;
    bytes_ += event_bytes(ev);
    if (bytes_ > cap_) overflowed_ = true;
    events_.push_back(std::move(ev));
    wake = !std::exchange(woken_, true);
  }
  if (wake) wake_();
}

std::deque<ServeEvent> HttpRequestSink::take() {
  std::lock_guard lock(mu_);
  std::deque<ServeEvent> out;
  out.swap(events_);
  bytes_ = 0;
  woken_ = false;
  return out;
}

bool HttpRequestSink::overflowed() const {
  std::lock_guard lock(mu_);
  return overflowed_;
}

}  // namespace qmpi
