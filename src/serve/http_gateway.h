// The OpenAI-compatible HTTP front on rank 0 (cpp-httplib, its own thread pool):
//   POST /v1/chat/completions, POST /v1/completions (stream: server-sent events; else one body),
//   GET /v1/models, GET /health, GET /metrics (Prometheus text).
// Requests go through the same RequestHub as the ZeroMQ broker's. A handler thread waits on its
// own request's events only, so a slow HTTP client holds its thread and nothing else; one that
// stops reading fails its write after cpp-httplib's write timeout and its request is cancelled.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "requests/sequence_spec.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace qmpi {

struct HttpOptions {
  std::string listen;                            // --http, "HOST:PORT" (port 0 = any free port)
  std::string api_key;                           // empty: no authentication
  size_t max_body_bytes = size_t(1) << 20;       // larger bodies get 413 BodyTooLarge
  int threads = 64;                              // concurrent connections served (streams hold one)
  size_t client_buffer_bytes = size_t(4) << 20;  // events held for one response before it fails
  std::string model_name;                        // GET /v1/models and responses' default "model"
};

class HttpGateway {
 public:
  // Binds (Usage error when it cannot) and starts serving. `model` needs tokenizer, chat and
  // vocab_size; it and the others must outlive the gateway.
  HttpGateway(const HttpOptions& opts, const BatchModel& model, RequestHub& hub,
              ServeMetrics& metrics);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // Stops listening and waits for the handlers in flight (their requests should be done).
  void stop();

 private:
  class Server;
  class Sink;
  struct Stream;

  void routes();
  void completions(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  bool pump(Stream& s, std::string& out);
  // The error's JSON body, with its status (or `status` when given). fail: a refusal of the
  // front itself, counted in the metrics; answer_error: an error the engine loop delivered
  // (and counted already).
  void fail(httplib::Response& res, const Error& e, int status = 0);
  void answer_error(httplib::Response& res, const Error& e, int status = 0);

  HttpOptions opts_;
  const BatchModel& model_;
  RequestHub& hub_;
  ServeMetrics& metrics_;
  std::unique_ptr<Server> server_;
  std::string host_;
  int port_ = 0;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;
};

// "HOST:PORT", "[v6]:PORT" or "PORT" (all interfaces) -> host, port. Raises Usage.
std::pair<std::string, int> parse_listen_address(const std::string& s);

}  // namespace qmpi
