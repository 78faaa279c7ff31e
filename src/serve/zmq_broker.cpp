#include "serve/zmq_broker.h"

#include <cerrno>
#include <vector>

#include <spdlog/spdlog.h>

#include "requests/served_model.h"
#include "serve/protocol.h"

namespace qmpi {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxMessagesPerPoll = 256;  // then deliver events and flush, so neither starves
constexpr int kLingerMs = 1000;

class ZmqSink final : public EventSink {
 public:
  ZmqSink(ZmqBroker& broker, std::string identity, std::string id, bool stream)
      : broker_(broker), identity_(std::move(identity)), id_(std::move(id)), stream_(stream) {}

  void deliver(ServeEvent ev) override {
    // The protocol has no "accepted" message; a request that does not stream gets its text in
    // the final message, so its deltas need not travel.
    if (ev.kind == ServeEvent::Kind::Accepted) return;
    if (ev.kind == ServeEvent::Kind::Delta && !stream_) return;
    broker_.post({identity_, id_, std::move(ev)});
  }

 private:
  ZmqBroker& broker_;
  std::string identity_;
  std::string id_;
  bool stream_;
};

}  // namespace

ZmqBroker::ZmqBroker(const BrokerOptions& opts, const ModelFacts& model, RequestHub& hub,
                     ServeMetrics& metrics)
    : opts_(opts),
      model_(model),
      hub_(hub),
      metrics_(metrics),
      ctx_(1),
      router_(ctx_, zmq::socket_type::router) {
  router_.set(zmq::sockopt::router_mandatory, true);  // a full or vanished peer is an error
  router_.set(zmq::sockopt::sndhwm, opts_.send_hwm);
  // Past the soft limit a message gets BodyTooLarge; past this one ZeroMQ drops the connection
  // without reading it.
  router_.set(zmq::sockopt::maxmsgsize, int64_t(opts_.max_message_bytes) * 16);
  router_.set(zmq::sockopt::linger, kLingerMs);
  // Peers that vanished silently are noticed by TCP keepalive, which the peer's kernel answers
  // whether or not the client reads. (ZeroMQ heartbeats are not: a client whose receive queue
  // is full stops reading its socket, heartbeats included, and would be cut off as if gone.)
  router_.set(zmq::sockopt::tcp_keepalive, 1);
  router_.set(zmq::sockopt::tcp_keepalive_idle, 10);
  router_.set(zmq::sockopt::tcp_keepalive_intvl, 5);
  router_.set(zmq::sockopt::tcp_keepalive_cnt, 3);
  try {
    router_.bind(opts_.endpoint);
  } catch (const zmq::error_t& e) {
    // A port in use or an address not of this host is the host's state (as for HTTP); anything
    // else is an endpoint that is not well formed.
    const bool taken = e.num() == EADDRINUSE || e.num() == EADDRNOTAVAIL;
    raise(taken ? Err::ListenFailed : Err::Usage,
          "cannot listen on --zmq " + opts_.endpoint + ": " + e.what(),
          "Give a free port on an address of this host, e.g. --zmq tcp://0.0.0.0:5555.");
  }
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  thread_ = std::thread([this] { run(); });
}

ZmqBroker::~ZmqBroker() {
  if (thread_.joinable()) stop(std::chrono::milliseconds(0));
}

void ZmqBroker::stop(std::chrono::milliseconds flush) {
  if (!thread_.joinable()) return;
  flush_ms_ = flush.count();
  stopping_ = true;
  wake_.signal();
  thread_.join();
}

void ZmqBroker::post(Outgoing out) {
  bool was_empty = false;
  {
    std::lock_guard lock(out_mu_);
    was_empty = out_.empty();
    out_.push_back(std::move(out));
  }
  if (was_empty) wake_.signal();
}

void ZmqBroker::run() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_.fd(), ZMQ_POLLIN, 0}};
  bool backlog = false;
  Clock::time_point deadline{};
  for (;;) {
    try {
      // With a backlog, retry it soon; otherwise sleep until a client or the engine writes.
      zmq::poll(items, 2, std::chrono::milliseconds(backlog ? 5 : 250));
      if (items[1].revents & ZMQ_POLLIN) wake_.drain();
      deliver_posted();
      if (items[0].revents & ZMQ_POLLIN) receive();
      backlog = flush_backlogs();
    } catch (const std::exception& e) {
      spdlog::error("zmq broker: {}", e.what());
    }
    if (stopping_) {
      if (deadline == Clock::time_point{})
        deadline = Clock::now() + std::chrono::milliseconds(flush_ms_.load());
      deliver_posted();
      backlog = flush_backlogs();
      if (!backlog || Clock::now() >= deadline) break;
    }
  }
  router_.close();  // lingers up to kLingerMs for messages already handed to ZeroMQ
}

void ZmqBroker::receive() {
  for (int n = 0; n < kMaxMessagesPerPoll; ++n) {
    zmq::message_t identity;
    if (!router_.recv(identity, zmq::recv_flags::dontwait)) return;
    // Only the first two frames after the identity can be valid; the rest are counted.
    std::vector<zmq::message_t> parts;
    size_t frames = 0;
    bool more = identity.more();
    while (more) {
      zmq::message_t m;
      (void)router_.recv(m, zmq::recv_flags::none);
      more = m.more();
      ++frames;
      if (parts.size() < 2) parts.push_back(std::move(m));
    }
    const std::string id(identity.to_string());
    const bool delimiter = frames >= 1 && parts[0].size() == 0;
    if (frames == 1) {
      handle(id, false, parts[0].to_string_view());
    } else if (frames == 2 && delimiter) {
      handle(id, true, parts[1].to_string_view());
    } else {
      const Error e(Err::RequestJson,
                    "a message has " + std::to_string(frames) +
                        " frames after the routing id; send [json] (DEALER) or [empty][json] "
                        "(REQ)",
                    "See docs/protocol.md for the frames.");
      metrics_.request_failed(e.code());
      reply(id, delimiter, error_message("", e));
      forget_if_idle(id);
    }
  }
}

void ZmqBroker::handle(const std::string& identity, bool delimiter, std::string_view payload) {
  const auto arrival = Clock::now();
  std::string id;
  if (const auto it = clients_.find(identity); it != clients_.end())
    it->second.delimiter = delimiter;
  try {
    if (payload.size() > opts_.max_message_bytes)
      raise(Err::BodyTooLarge,
            "the message is " + std::to_string(payload.size()) + " bytes; --max-request-bytes " +
                std::to_string(opts_.max_message_bytes) + " allows",
            "Send a shorter prompt, or raise --max-request-bytes.");
    ClientMessage m = parse_client_message(payload, id, opts_.api_key);
    switch (m.type) {
      case MessageType::Health:
        return reply(identity, delimiter, health_message(id, hub_.snapshot().health));
      case MessageType::Stats:
        return reply(identity, delimiter,
                     stats_message(id, hub_.snapshot(), hub_.queued(), metrics_.counters(),
                                   int64_t(clients_.size())));
      case MessageType::Cancel: {
        // The request ends with a final message, finish_reason "cancelled".
        if (const auto c = clients_.find(identity); c != clients_.end()) {
          if (const auto r = c->second.requests.find(id); r != c->second.requests.end()) {
            hub_.cancel(r->second.ticket);
            return;
          }
        }
        raise(Err::UnknownRequestId, "no request with id " + id + " from this client is in flight");
      }
      case MessageType::Generate:
        return generate(identity, delimiter, id, std::move(m.request), arrival);
    }
  } catch (const Error& e) {
    metrics_.request_failed(e.code());
    reply(identity, delimiter, error_message(id, e));
    forget_if_idle(identity);
  } catch (const std::exception& e) {  // a bug, not the client's fault: it still gets an answer
    const Error err(Err::Internal, std::string("the broker failed on this message: ") + e.what());
    metrics_.request_failed(err.code());
    reply(identity, delimiter, error_message(id, err));
    forget_if_idle(identity);
  }
}

void ZmqBroker::generate(const std::string& identity, bool delimiter, const std::string& id,
                         Request req, Clock::time_point arrival) {
  Client& c = clients_[identity];
  c.delimiter = delimiter;
  if (c.dropped)
    raise(Err::ClientTooSlow, "this connection was dropped for not reading its replies",
          "Reconnect, and read replies as they come.");
  if (c.requests.count(id))
    raise(Err::RequestField, "request " + id + " is already in flight from this client",
          "Give every request its own id.");
  check_served_model(req.model, model_.served_names, model_.adapter_names);
  ServeRequest r;
  r.client_id = id;
  r.prompt = request_prompt_ids(req, model_);
  r.req = std::move(req);
  r.arrival = arrival;
  const bool stream = r.req.stream;
  r.sink = std::make_shared<ZmqSink>(*this, identity, id, stream);
  const uint64_t ticket = hub_.submit(std::move(r));
  clients_[identity].requests[id] = {ticket, stream, delimiter};
}

void ZmqBroker::deliver_posted() {
  std::deque<Outgoing> batch;
  {
    std::lock_guard lock(out_mu_);
    batch.swap(out_);
  }
  for (Outgoing& o : batch) {
    const auto c = clients_.find(o.identity);
    if (c == clients_.end()) continue;  // dropped or gone: its requests were cancelled
    const auto r = c->second.requests.find(o.id);
    if (r == c->second.requests.end()) continue;
    const InFlight req = r->second;
    std::string message;
    switch (o.event.kind) {
      case ServeEvent::Kind::Delta:
        message = delta_message(o.id, o.event);
        break;
      case ServeEvent::Kind::Final:
        c->second.requests.erase(r);
        message = final_message(o.id, *o.event.result, !req.stream);
        break;
      case ServeEvent::Kind::Error:
        c->second.requests.erase(r);
        message = error_message(o.id, *o.event.error);
        break;
      case ServeEvent::Kind::Accepted:
        continue;
    }
    const bool last = o.event.kind != ServeEvent::Kind::Delta;
    reply(o.identity, req.delimiter, message, last ? o.id : std::string());
    forget_if_idle(o.identity);
  }
}

ZmqBroker::Sent ZmqBroker::try_send(const std::string& identity, bool delimiter,
                                    const std::string& payload) {
  try {
    if (!router_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return Sent::Full;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Sent::Gone;
    if (e.num() == EAGAIN) return Sent::Full;
    throw;
  }
  if (delimiter) router_.send(zmq::message_t(), zmq::send_flags::sndmore);
  router_.send(zmq::buffer(payload), zmq::send_flags::none);
  return Sent::Yes;
}

void ZmqBroker::reply(const std::string& identity, bool delimiter, const std::string& payload,
                      const std::string& ends) {
  const auto c = clients_.find(identity);
  if (c != clients_.end() && (c->second.dropped || !c->second.backlog.empty()))
    return hold(identity, c->second, {delimiter, payload, ends});
  switch (try_send(identity, delimiter, payload)) {
    case Sent::Yes:
      return;
    case Sent::Full:
      hold(identity, clients_[identity], {delimiter, payload, ends});
      return;
    case Sent::Gone:
      if (c != clients_.end()) drop(identity, c->second, true);
      return;
  }
}

void ZmqBroker::hold(const std::string& identity, Client& c, Pending message) {
  const size_t bytes = message.payload.size();
  if (c.dropped) {
    // Replies to what a dropped client sends meanwhile wait behind its errors, within the
    // same limit; past it the client is not reading anything, and they are let go.
    if (c.backlog_bytes + bytes > opts_.client_buffer_bytes) return;
  }
  c.backlog.push_back(std::move(message));
  c.backlog_bytes += bytes;
  if (!c.dropped && c.backlog_bytes > opts_.client_buffer_bytes) drop(identity, c, false);
}

bool ZmqBroker::flush_backlogs() {
  bool left = false;
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = it->second;
    bool gone = false;
    while (!c.backlog.empty()) {
      const Sent s = try_send(it->first, c.backlog.front().delimiter, c.backlog.front().payload);
      if (s == Sent::Full) break;
      if (s == Sent::Gone) {
        gone = true;
        break;
      }
      c.backlog_bytes -= c.backlog.front().payload.size();
      c.backlog.pop_front();
    }
    if (gone || (c.backlog.empty() && c.requests.empty())) {
      for (const auto& [id, r] : c.requests) hub_.cancel(r.ticket);
      it = clients_.erase(it);
      continue;
    }
    left = left || !c.backlog.empty();
    ++it;
  }
  return left;
}

void ZmqBroker::drop(const std::string& identity, Client& c, bool gone) {
  const size_t n = c.requests.size();
  for (const auto& [id, r] : c.requests) hub_.cancel(r.ticket);  // frees their KV blocks
  if (gone) {
    if (n > 0) spdlog::info("zmq: a client went away; cancelled its {} requests", n);
    clients_.erase(identity);
    return;
  }
  // Every request that has not had its end sent to ZeroMQ hears why it stopped: those in
  // flight, and those whose final or error is among the replies let go here.
  std::vector<std::pair<std::string, bool>> ended;  // id, envelope
  for (const auto& [id, r] : c.requests) ended.emplace_back(id, r.delimiter);
  for (const Pending& p : c.backlog)
    if (!p.ends.empty()) ended.emplace_back(p.ends, p.delimiter);
  const size_t held = c.backlog_bytes;
  spdlog::warn(
      "zmq: dropped a client that left {} bytes of replies unread; cancelled its {} "
      "requests",
      held, n);
  c.requests.clear();
  c.backlog.clear();
  c.backlog_bytes = 0;
  c.dropped = true;
  metrics_.client_dropped();
  const Error e(Err::ClientTooSlow,
                "this client read its replies too slowly (" + std::to_string(held) +
                    " bytes waited past the per-client limit of " +
                    std::to_string(opts_.client_buffer_bytes) + "); its requests were cancelled",
                "Read replies as they come, or run fewer requests at once per connection.");
  for (const auto& [id, delimiter] : ended) {
    std::string msg = error_message(id, e);
    c.backlog_bytes += msg.size();
    c.backlog.push_back({delimiter, std::move(msg), id});
  }
}

void ZmqBroker::forget_if_idle(const std::string& identity) {
  const auto c = clients_.find(identity);
  if (c != clients_.end() && c->second.requests.empty() && c->second.backlog.empty())
    clients_.erase(c);
}

}  // namespace qmpi
