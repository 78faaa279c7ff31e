// The ZeroMQ front on rank 0: a ROUTER socket owned by its own thread. Each message is checked
// and tokenized here, then handed to the engine loop through the RequestHub; the events the
// loop delivers come back through a queue and an eventfd and go out to the client that asked.
// Frames: [identity][empty?][json] in, the same envelope out (docs/protocol.md).
//
// Slow clients never stall others: ZeroMQ holds up to `send_hwm` messages per client; past
// that the broker keeps up to `client_buffer_bytes` more, and a client that still does not
// read is dropped: its requests are cancelled (their KV blocks freed) and each request whose
// end it had not been sent yet gets one ClientTooSlow error with its id, so no request ends
// silently. A client is gone only when its connection is: the broker uses TCP keepalive, not
// ZeroMQ heartbeats, because a client that does not read does not answer heartbeats either.
// A client that disconnects is noticed when the next message to it fails, and dropped alike.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include <zmq.hpp>

#include "requests/sequence_spec.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"
#include "serve/wake_fd.h"

namespace qmpi {

struct BrokerOptions {
  std::string endpoint;                        // --zmq, e.g. tcp://0.0.0.0:5555 (port * = any)
  size_t max_message_bytes = size_t(1) << 20;  // larger messages get BodyTooLarge
  int send_hwm = 1000;                         // messages ZeroMQ queues per client
  size_t client_buffer_bytes = size_t(4) << 20;
  std::string api_key;  // empty: no authentication; else generate and cancel must carry it
};

class ZmqBroker {
 public:
  // Binds (Usage error when the endpoint cannot be bound) and starts the thread. `model`
  // needs tokenizer, chat and vocab_size; it and the others must outlive the broker.
  ZmqBroker(const BrokerOptions& opts, const ModelFacts& model, RequestHub& hub,
            ServeMetrics& metrics);
  ~ZmqBroker();
  ZmqBroker(const ZmqBroker&) = delete;
  ZmqBroker& operator=(const ZmqBroker&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // as bound (the real port)
  // Sends what the engine delivered so far (for up to `flush`), then closes the socket.
  void stop(std::chrono::milliseconds flush);

  // Sink side (engine thread): queues one event for a client's request.
  struct Outgoing {
    std::string identity;
    std::string id;  // the client's request id, JSON text
    ServeEvent event;
  };
  void post(Outgoing out);

 private:
  struct InFlight {
    uint64_t ticket = 0;
    bool stream = false;
    bool delimiter = false;
  };
  struct Pending {
    bool delimiter = false;
    std::string payload;
    std::string ends;  // the id of the request this message ends (its final or error), or ""
  };
  struct Client {
    std::unordered_map<std::string, InFlight> requests;  // by id
    std::deque<Pending> backlog;  // messages ZeroMQ did not take yet, in order
    size_t backlog_bytes = 0;
    bool delimiter = false;  // the envelope of its last message
    bool dropped = false;    // only its ClientTooSlow error is left to send
  };
  enum class Sent : uint8_t { Yes, Full, Gone };

  void run();
  void receive();
  void handle(const std::string& identity, bool delimiter, std::string_view payload);
  void generate(const std::string& identity, bool delimiter, const std::string& id,
                qmpi::Request req, std::chrono::steady_clock::time_point arrival);
  void deliver_posted();
  // `ends`: the id of the request whose last message this is ("" for other replies).
  void reply(const std::string& identity, bool delimiter, const std::string& payload,
             const std::string& ends = {});
  Sent try_send(const std::string& identity, bool delimiter, const std::string& payload);
  void hold(const std::string& identity, Client& c, Pending message);
  bool flush_backlogs();  // true while some client still has a backlog
  void drop(const std::string& identity, Client& c, bool gone);
  void forget_if_idle(const std::string& identity);

  BrokerOptions opts_;
  const ModelFacts& model_;
  RequestHub& hub_;
  ServeMetrics& metrics_;
  zmq::context_t ctx_;
  zmq::socket_t router_;
  std::string endpoint_;
  WakeFd wake_;
  std::mutex out_mu_;
  std::deque<Outgoing> out_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> flush_ms_{0};
  std::unordered_map<std::string, Client> clients_;  // broker thread only
  std::thread thread_;
};

}  // namespace qmpi
