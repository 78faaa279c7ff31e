#include "serve/http_connection.h"

#include <chrono>
#include <deque>
#include <limits>
#include <string_view>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include "core/unix_time.h"
#include "requests/response_json.h"
#include "requests/served_model.h"
#include "serve/http_completion.h"
#include "serve/http_framing.h"
#include "serve/http_request_sink.h"
#include "serve/http_tools.h"
#include "serve/openai_stream.h"
#include "serve/protocol.h"
#include "serve/sse_writer.h"

namespace qmpi {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// What a refused client may still send before its connection is closed without reading more.
constexpr size_t kLingerBytes = size_t(64) << 20;
constexpr size_t kDrainChunk = 16384;

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

// Errors of the request's bytes (answered with 400/431), as opposed to the socket's.
// One entry of GET /v1/models, as OpenAI shapes it, with vLLM's root and max_model_len (null
// while the engine loads).
// `parent`: the base model's id for a LoRA adapter, else empty (null).
json model_object(const std::string& id, const std::string& root, int64_t max_model_len,
                  const std::string& parent = {}) {
  return {{"id", id},
          {"object", "model"},
          {"created", unix_seconds()},
          {"owned_by", "qmpi"},
          {"root", root},
          {"parent", parent.empty() ? json(nullptr) : json(parent)},
          {"max_model_len", max_model_len > 0 ? json(max_model_len) : json(nullptr)}};
}

bool is_parse_error(beast::error_code ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

// A streamed response's state, allocated only while one is written.
struct HttpConnection::Streaming {
  explicit Streaming(SseWriter w) : sse(std::move(w)) {}
  SseWriter sse;
  http::response<http::empty_body> head;
  std::optional<http::response_serializer<http::empty_body>> head_sr;
  std::string out;      // rendered, not yet handed to a write
  std::string writing;  // the write in flight
  bool chunked = true;  // HTTP/1.0 has no chunks: the end of the stream is the connection's
  bool last_sent = false;
};

HttpConnection::HttpConnection(net::ip::tcp::socket socket, HttpFront& front)
    : front_(front), stream_(std::move(socket)) {}

HttpConnection::~HttpConnection() {
  abandon();
}

void HttpConnection::start() {
  front_.connections.add(shared_from_this());
  read_request();
}

void HttpConnection::shut() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->shut_ = true;
    // Between requests (or still reading one, not yet submitted): nothing to finish.
    if (self->phase_ == Phase::Reading) self->close();
  });
}

// --- reading a request ---------------------------------------------------------------------

void HttpConnection::read_request() {
  if (shut_ || front_.stopping) return close();
  phase_ = Phase::Reading;
  head_ = false;
  parser_.emplace();
  parser_->header_limit(uint32_t(front_.opts.max_header_bytes));
  // The body's limit is set once the head is routed: a Content-Length past it is answered 413
  // then, after the API key and the route are checked. (Not boost::none: Beast 1.74 compares a
  // Content-Length with an empty limit as larger.)
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
  if (buffer_.size() == 0) buffer_.shrink_to_fit();  // an idle connection holds no buffer
  // A new connection is owed its first request's head within the header timeout, counted from
  // the connect; only a kept-alive one may wait the idle timeout between requests.
  stream_.expires_after(served_ == 0 ? front_.opts.timeouts.header : front_.opts.timeouts.idle);
  http::async_read_some(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_first_bytes(ec); });
}

void HttpConnection::on_first_bytes(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  if (parser_->is_header_done()) return on_header({});
  // The request has begun: the whole head must follow within the header timeout (a new
  // connection's runs from the connect already).
  if (served_ > 0) stream_.expires_after(front_.opts.timeouts.header);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto& req = parser_->get();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  head_ = req.method() == http::verb::head;
  const std::string_view target = sv(req.target());
  const bool body_unread = !parser_->is_done();
  if (auto refusal = framing_refusal(req)) {
    keep_alive_ = false;
    return respond_error(refusal->error, refusal->status, true);
  }
  // A browser's preflight OPTIONS carries no credentials.
  if (!front_.opts.api_key.empty() && needs_api_key(target_path(target)) &&
      req.method() != http::verb::options) {
    const auto auth = req.find(http::field::authorization);
    if (auth == req.end() || !bearer_matches(sv(auth->value()), front_.opts.api_key))
      return respond_error(unauthorized_error(auth != req.end()), 0, body_unread);
  }
  route_ = match_route(sv(req.method_string()), target);
  target_ = std::string(target.substr(0, 1024));
  if (route_ == HttpRoute::NotFound)
    return respond_error(not_found_error(sv(req.method_string()), target), 404, body_unread);
  if (!body_unread) return dispatch();
  const auto length = parser_->content_length();
  if (length && *length > front_.opts.max_body_bytes)
    return respond_error(body_too_large_error(front_.opts.max_body_bytes), 0, true);
  parser_->body_limit(front_.opts.max_body_bytes);  // enforced chunk by chunk when chunked
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void HttpConnection::read_body() {
  stream_.expires_after(front_.opts.timeouts.body);
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit)
    return respond_error(body_too_large_error(front_.opts.max_body_bytes), 0, true);
  if (ec) return on_read_error(ec);
  dispatch();
}

void HttpConnection::on_read_error(beast::error_code ec) {
  // A client gone, a timeout (the socket is closed already) or the gateway stopping.
  if (!is_parse_error(ec)) return close();
  if (ec == http::error::header_limit)
    return respond_error(
        unreadable_request_error("its head is longer than " +
                                 std::to_string(front_.opts.max_header_bytes) + " bytes"),
        431, true);
  respond_error(unreadable_request_error(ec.message()), 400, true);
}

// --- answering -----------------------------------------------------------------------------

void HttpConnection::dispatch() {
  switch (route_) {
    case HttpRoute::Health: {
      const EngineSnapshot s = front_.hub.snapshot();
      return respond(s.health == Health::Ready ? 200 : 503, health_body(s), kJson);
    }
    case HttpRoute::Metrics:
      return respond(200, front_.metrics.render(front_.hub.snapshot(), front_.hub.queued()),
                     "text/plain; version=0.0.4; charset=utf-8");
    case HttpRoute::Models: {
      json data = json::array();
      const auto& listed = front_.opts.listed_models;
      const int64_t len = front_.hub.snapshot().max_model_len;
      if (listed.empty())
        data.push_back(model_object(front_.opts.model_name, front_.opts.model_root, len));
      for (const std::string& name : listed)
        data.push_back(model_object(name, front_.opts.model_root, len));
      const auto& adapters = front_.model.adapter_names;
      for (size_t i = 0; i < adapters.size(); ++i)
        data.push_back(model_object(adapters[i], front_.opts.adapter_roots.at(i), len,
                                    front_.opts.model_name));
      return respond(200, json{{"object", "list"}, {"data", std::move(data)}}.dump(), kJson);
    }
    case HttpRoute::Model: {
      const std::string id = model_id_of(target_);
      int32_t adapter = -1;
      try {
        adapter = check_served_model(id, front_.model.served_names, front_.model.adapter_names);
      } catch (const Error& e) {
        return respond_error(e);
      }
      const int64_t len = front_.hub.snapshot().max_model_len;
      return respond(200,
                     (adapter < 0 ? model_object(id, front_.opts.model_root, len)
                                  : model_object(id, front_.opts.adapter_roots.at(size_t(adapter)),
                                                 len, front_.opts.model_name))
                         .dump(),
                     kJson);
    }
    case HttpRoute::Tokenize:
    case HttpRoute::Detokenize:
    case HttpRoute::Version:
    case HttpRoute::Options:
      return answer_tool();
    case HttpRoute::Chat:
      return prepare(Endpoint::Chat);
    case HttpRoute::Completion:
      return prepare(Endpoint::Completion);
    case HttpRoute::NotFound:
      break;
  }
  respond_error(not_found_error("?", "?"), 404);
}

// vLLM's small endpoints, answered here: tokenizing a body no larger than --max-request-bytes.
void HttpConnection::answer_tool() {
  try {
    switch (route_) {
      case HttpRoute::Tokenize:
        return respond(200,
                       tokenize_response(parser_->get().body(), front_.model,
                                         front_.hub.snapshot().max_model_len),
                       kJson);
      case HttpRoute::Detokenize:
        return respond(200, detokenize_response(parser_->get().body(), front_.model), kJson);
      case HttpRoute::Version:
        return respond(200, version_response(), kJson);
      default:
        return respond(204, "", kJson);  // OPTIONS: the Allow header says what there is
    }
  } catch (const Error& e) {
    respond_error(e);
  }
}

void HttpConnection::prepare(Endpoint endpoint) {
  phase_ = Phase::Preparing;
  auto body = std::make_shared<std::string>(std::move(parser_->get().body()));
  parser_.reset();
  const auto arrival = Clock::now();
  net::post(front_.prep, [self = shared_from_this(), body, endpoint, arrival] {
    self->submit_on_pool(*body, endpoint, arrival);
  });
}

// On a preparation thread: reads only front_ and what it creates; the result goes back to the
// connection's strand.
void HttpConnection::submit_on_pool(const std::string& body, Endpoint endpoint,
                                    Clock::time_point arrival) {
  std::shared_ptr<HttpCompletion> c;
  std::shared_ptr<HttpRequestSink> sink;
  uint64_t ticket = 0;
  std::optional<Error> err;
  try {
    c = std::make_shared<HttpCompletion>(
        parse_completion(body, endpoint, front_.model, front_.opts.model_name, front_.next_seq++));
    c->request.arrival = arrival;
    auto wake = [weak = weak_from_this(), ex = stream_.get_executor()] {
      net::post(ex, [weak] {
        if (const auto self = weak.lock()) self->on_events();
      });
    };
    sink = std::make_shared<HttpRequestSink>(c->stream, front_.opts.client_buffer_bytes,
                                             std::move(wake));
    c->request.sink = sink;
    ticket = front_.hub.submit(std::move(c->request));
    c->shape.id = completion_id(endpoint, ticket);
    c->shape.number = ticket;
  } catch (const Error& e) {
    err = e;
  } catch (const std::exception& e) {
    err = Error(Err::Internal, std::string("the HTTP request could not be prepared: ") + e.what());
  }
  net::post(stream_.get_executor(), [self = shared_from_this(), c, sink, ticket, err] {
    self->on_prepared(c, sink, ticket, err);
  });
}

void HttpConnection::on_prepared(std::shared_ptr<HttpCompletion> c,
                                 std::shared_ptr<HttpRequestSink> sink, uint64_t ticket,
                                 std::optional<Error> err) {
  if (closed_) {
    if (!err) front_.hub.cancel(ticket);  // the client went away while it was prepared
    return;
  }
  if (err) return respond_error(*err);
  sink_ = std::move(sink);
  ticket_ = ticket;
  in_flight_ = true;
  stream_req_ = c->stream;
  token_ids_ = c->shape.token_ids;
  if (stream_req_)
    streaming_ = std::make_unique<Streaming>(SseWriter(c->shape, c->choices, c->include_usage));
  phase_ = Phase::Waiting;
  watch_hang_up();
  on_events();  // what arrived before this ran
}

// A request waiting in the queue, or one that does not stream, writes nothing for a long time:
// watch the socket so that a client that goes away frees its place at once (as a proxy treats
// a client that closes before its answer), not when its answer is finally written.
void HttpConnection::watch_hang_up() {
  stream_.socket().async_wait(
      net::ip::tcp::socket::wait_read,
      [self = shared_from_this(), ticket = ticket_](beast::error_code ec) {
        if (ec || self->closed_ || !self->in_flight_ || self->ticket_ != ticket) return;
        char byte = 0;
        beast::error_code peek;
        auto& socket = self->stream_.socket();
        socket.non_blocking(true, peek);
        const size_t n =
            socket.receive(net::buffer(&byte, 1), net::socket_base::message_peek, peek);
        if (peek == net::error::would_block) return self->watch_hang_up();
        // Bytes: the client pipelined its next request and is still there; stop watching.
        if (peek || n == 0) self->close();
      });
}

void HttpConnection::end_request() {
  in_flight_ = false;
}

void HttpConnection::abandon() {
  if (!in_flight_) return;
  in_flight_ = false;
  front_.hub.cancel(ticket_);
}

void HttpConnection::on_events() {
  if (closed_ || !sink_ || (phase_ != Phase::Waiting && phase_ != Phase::Streaming)) return;
  std::deque<ServeEvent> events = sink_->take();
  if (!stream_req_) {
    for (const ServeEvent& ev : events) {
      if (ev.kind == ServeEvent::Kind::Error) {
        end_request();
        return respond_error(*ev.error, 0, false, false);
      }
      if (ev.kind == ServeEvent::Kind::Final) {
        end_request();
        return respond(200, response_body(*ev.result, *front_.model.tokenizer, token_ids_), kJson);
      }
    }
    return;
  }
  if (events.empty()) return;
  if (phase_ == Phase::Waiting) {
    // The first event says whether the engine took the request: a refusal is an HTTP error.
    if (events.front().kind == ServeEvent::Kind::Error) {
      end_request();
      streaming_.reset();
      return respond_error(*events.front().error, 0, false, false);
    }
    start_stream();
  }
  Streaming& s = *streaming_;
  if (sink_->overflowed()) too_slow();
  for (const ServeEvent& ev : events) {
    s.sse.write(ev, s.out);
    if (ev.kind == ServeEvent::Kind::Final || ev.kind == ServeEvent::Kind::Error) end_request();
  }
  if (!s.sse.done() && s.out.size() + s.writing.size() > front_.opts.client_buffer_bytes)
    too_slow();
  pump();
}

void HttpConnection::too_slow() {
  Streaming& s = *streaming_;
  if (s.sse.done()) return;
  const Error e(Err::ClientTooSlow, "the response fell more than " +
                                        std::to_string(front_.opts.client_buffer_bytes) +
                                        " bytes behind the generation; the request was cancelled");
  front_.metrics.request_failed(e.code());
  front_.metrics.client_dropped();
  abandon();
  s.out.clear();
  s.sse.fail(e, s.out);
}

void HttpConnection::start_stream() {
  phase_ = Phase::Streaming;
  Streaming& s = *streaming_;
  s.head.result(http::status::ok);
  s.head.version(version_);
  s.head.set(http::field::content_type, "text/event-stream");
  s.head.set(http::field::cache_control, "no-cache");
  s.chunked = version_ >= 11;
  if (!s.chunked) keep_alive_ = false;
  s.head.keep_alive(keep_alive_);
  s.head.chunked(s.chunked);
  s.head_sr.emplace(s.head);
  write_busy_ = true;
  stream_.expires_after(front_.opts.timeouts.write);
  http::async_write_header(stream_, *s.head_sr,
                           [self = shared_from_this()](beast::error_code ec, size_t) {
                             self->write_busy_ = false;
                             if (ec) return self->close();
                             self->streaming_->head_sr.reset();
                             self->pump();
                           });
}

// Starts the next write of a stream: the text rendered since the last one, or the last chunk;
// once that is written the exchange is over.
void HttpConnection::pump() {
  if (write_busy_ || closed_) return;
  Streaming& s = *streaming_;
  const auto written = [self = shared_from_this()](beast::error_code ec, size_t) {
    self->write_busy_ = false;
    // A client that hung up, or did not read within the write timeout: its request ends here.
    if (ec) return self->close();
    self->streaming_->writing.clear();
    self->pump();
  };
  if (!s.out.empty()) {
    s.writing.swap(s.out);
    write_busy_ = true;
    stream_.expires_after(front_.opts.timeouts.write);
    if (s.chunked)
      net::async_write(stream_, http::make_chunk(net::buffer(s.writing)), written);
    else
      net::async_write(stream_, net::buffer(s.writing), written);
  } else if (s.sse.done() && !s.last_sent && s.chunked) {
    s.last_sent = true;
    write_busy_ = true;
    stream_.expires_after(front_.opts.timeouts.write);
    net::async_write(stream_, http::make_chunk_last(), written);
  } else if (s.sse.done()) {
    finish_exchange();
  }
}

void HttpConnection::respond(int status, std::string body, const char* content_type,
                             bool body_unread) {
  phase_ = Phase::Writing;
  res_.emplace(http::int_to_status(unsigned(status)), version_);
  res_->set(http::field::content_type, content_type);
  if (status == 401) res_->set(http::field::www_authenticate, "Bearer");
  if (route_ == HttpRoute::Options) res_->set(http::field::allow, "GET, POST, OPTIONS");
  res_->keep_alive(keep_alive_ && !body_unread && !shut_ && !front_.stopping);
  res_->body() = std::move(body);
  res_->prepare_payload();
  if (head_) res_->body().clear();  // HEAD: GET's headers, Content-Length included; no body
  linger_after_ = body_unread;
  stream_.expires_after(front_.opts.timeouts.write);
  http::async_write(stream_, *res_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_response_written(ec);
  });
}

void HttpConnection::respond_error(const Error& e, int status, bool body_unread, bool counted) {
  if (counted) front_.metrics.request_failed(e.code());
  respond(status > 0 ? status : http_status(e.code()), http_error_body(e), kJson, body_unread);
}

void HttpConnection::on_response_written(beast::error_code ec) {
  res_.reset();
  if (ec) return close();
  if (linger_after_) return linger();
  finish_exchange();
}

void HttpConnection::finish_exchange() {
  ++served_;
  sink_.reset();
  streaming_.reset();
  ticket_ = 0;
  in_flight_ = false;
  if (!keep_alive_) {
    beast::error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
    return close();
  }
  read_request();
}

// --- closing -------------------------------------------------------------------------------

// The answer went out before the request's body was read: read and drop what the client still
// sends (bounded in bytes and time), so that it reads the answer instead of a reset.
void HttpConnection::linger() {
  phase_ = Phase::Closing;
  parser_.reset();
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  drained_ = 0;
  stream_.expires_after(front_.opts.timeouts.linger);
  drain();
}

void HttpConnection::drain() {
  stream_.async_read_some(buffer_.prepare(kDrainChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kLingerBytes) return self->close();
                            self->drain();
                          });
}

void HttpConnection::close() {
  if (closed_) return;
  closed_ = true;
  phase_ = Phase::Closing;
  abandon();
  stream_.close();
  front_.connections.remove(this);
}

}  // namespace qmpi
