// One HTTP/1.1 connection of the gateway, driven by Boost.Beast on the gateway's I/O threads
// (each connection on its own strand, so its handlers never run at once). It reads a request's
// head, routes it (API key, 404) before reading any body, reads the body within
// --max-request-bytes (chunked too), answers /health, /metrics and /v1/models at once, and
// hands completion bodies to the preparation threads, which check, tokenize and submit them to
// the hub. Then it waits for the request's events without any thread waiting: the engine's
// deliver() posts a wake to the strand. A streamed response is written chunk by chunk as events
// arrive; text not yet written is bounded by --client-buffer-bytes, past which the request is
// cancelled with a client-too-slow error event. Keep-alive, pipelining, `Expect: 100-continue`;
// every read and write has a timeout (HttpTimeouts).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "core/errors.h"
#include "requests/sequence_spec.h"
#include "serve/http_connection_set.h"
#include "serve/http_options.h"
#include "serve/http_routes.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"

namespace qmpi {

class HttpRequestSink;
struct HttpCompletion;

// What every connection of one gateway shares.
struct HttpFront {
  HttpFront(const HttpOptions& o, const ModelFacts& m, RequestHub& h, ServeMetrics& me)
      : opts(o), model(m), hub(h), metrics(me), prep(size_t(o.threads)) {}
  const HttpOptions opts;
  const ModelFacts& model;
  RequestHub& hub;
  ServeMetrics& metrics;
  boost::asio::thread_pool prep;  // checks, tokenizes and submits completion bodies
  HttpConnectionSet connections;
  std::atomic<uint64_t> next_seq{1};  // numbers requests: "http-<n>" seeds unseeded sampling
  std::atomic<bool> stopping{false};  // no new requests: close after the response in progress
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // `socket` must have been accepted on a strand of the gateway's io_context.
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpFront& front);
  ~HttpConnection();  // cancels the request in flight, if any
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Joins the gateway's connection set and reads the first request.
  void start();
  // From any thread: close once the response in progress is written (at once when none is).
  void shut();

 private:
  enum class Phase : uint8_t { Reading, Preparing, Waiting, Streaming, Writing, Closing };
  struct Streaming;

  void read_request();
  void on_first_bytes(boost::beast::error_code ec);
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void dispatch();
  void prepare(Endpoint endpoint);
  void submit_on_pool(const std::string& body, Endpoint endpoint,
                      std::chrono::steady_clock::time_point arrival);
  void on_prepared(std::shared_ptr<HttpCompletion> c, std::shared_ptr<HttpRequestSink> sink,
                   uint64_t ticket, std::optional<Error> err);
  void watch_hang_up();
  void on_events();
  void start_stream();
  void pump();
  void too_slow();
  void answer_tool();
  void respond(int status, std::string body, const char* content_type, bool body_unread = false);
  // `counted`: the error is the front's own (the engine counts those it delivers).
  void respond_error(const Error& e, int status = 0, bool body_unread = false, bool counted = true);
  void on_response_written(boost::beast::error_code ec);
  void finish_exchange();
  void linger();
  void drain();
  void close();
  void end_request();
  void abandon();

  HttpFront& front_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> res_;
  std::unique_ptr<Streaming> streaming_;  // a streamed response in progress
  Phase phase_ = Phase::Reading;
  HttpRoute route_ = HttpRoute::NotFound;
  std::string target_;  // the request target, for routes that read it (GET /v1/models/{id})
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;    // a HEAD request: its answer has no body
  size_t served_ = 0;    // requests answered on this connection
  bool shut_ = false;    // close after this response
  bool closed_ = false;  // socket closed, out of the connection set
  bool linger_after_ = false;
  bool write_busy_ = false;
  // The request in flight.
  std::shared_ptr<HttpRequestSink> sink_;
  uint64_t ticket_ = 0;
  bool in_flight_ = false;  // submitted, its last event not seen yet
  bool stream_req_ = false;
  bool token_ids_ = false;
  size_t drained_ = 0;
};

}  // namespace qmpi
