// The OpenAI-compatible HTTP front on rank 0 (HTTP/1.1 over Boost.Beast and Boost.Asio):
//   POST /v1/chat/completions, POST /v1/completions (stream: server-sent events; else one body),
//   GET /v1/models, GET /health, GET /metrics (Prometheus text).
// A fixed pool of I/O threads serves any number of connections (http_connection.h: one per
// client, no thread of its own), and as many preparation threads check and tokenize request
// bodies so that no I/O thread waits on a large prompt. Requests go through the same RequestHub
// as the ZeroMQ broker's, so the engine sees one queue.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "requests/sequence_spec.h"
#include "serve/http_options.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"

namespace qmpi {

class HttpGateway {
 public:
  // Binds (ListenFailed with the system's reason when it cannot) and starts serving. `model`
  // needs tokenizer, chat and vocab_size; it and the others must outlive the gateway.
  HttpGateway(const HttpOptions& opts, const ModelFacts& model, RequestHub& hub,
              ServeMetrics& metrics);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  size_t open_connections() const;
  // Stops accepting, closes idle connections, lets the responses in progress finish for up to
  // `flush`, then closes the rest and joins the threads. Idempotent.
  void stop(std::chrono::milliseconds flush = std::chrono::milliseconds(2000));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

// "HOST:PORT", "[v6]:PORT" or "PORT" (all interfaces) -> host, port. Raises Usage.
std::pair<std::string, int> parse_listen_address(const std::string& s);

}  // namespace qmpi
