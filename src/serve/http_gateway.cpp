#include "serve/http_gateway.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "serve/http_body.h"
#include "serve/openai_stream.h"
#include "serve/protocol.h"

namespace qmpi {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(500);
constexpr const char* kJson = "application/json";
constexpr int kListenBacklog = 1024;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t event_bytes(const ServeEvent& e) {
  return 64 + e.text.size() + 4 * e.token_ids.size();
}

bool bearer_matches(const std::string& header, const std::string& key) {
  const std::string want = "Bearer " + key;
  if (header.size() != want.size()) return false;
  unsigned char diff = 0;  // constant time: the key is a secret
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(header[i] ^ want[i]);
  return diff == 0;
}

}  // namespace

// cpp-httplib listens with a backlog of 5 (fixed when the library was built), so a burst of
// clients would see resets; Linux lets a second listen() on the socket raise it.
class HttpGateway::Server final : public httplib::Server {
 public:
  void raise_backlog(int n) { ::listen(svr_sock_, n); }
};

// The queue between the engine thread (deliver) and this request's handler thread (take).
class HttpGateway::Sink final : public EventSink {
 public:
  Sink(bool stream, size_t cap) : stream_(stream), cap_(cap) {}

  void deliver(ServeEvent ev) override {
    {
      std::lock_guard lock(mu_);
      if (ev.kind == ServeEvent::Kind::Delta && !stream_) return;  // the final has the text
      if (overflowed_) return;
      bytes_ += event_bytes(ev);
      if (bytes_ > cap_) overflowed_ = true;
      events_.push_back(std::move(ev));
    }
    cv_.notify_one();
  }

  std::deque<ServeEvent> take(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !events_.empty(); });
    std::deque<ServeEvent> out;
    out.swap(events_);
    bytes_ = 0;
    return out;
  }

  bool overflowed() {
    std::lock_guard lock(mu_);
    return overflowed_;
  }

 private:
  const bool stream_;
  const size_t cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ServeEvent> events_;
  size_t bytes_ = 0;
  bool overflowed_ = false;
};

struct HttpGateway::Stream {
  std::shared_ptr<Sink> sink;
  StreamShape shape;
  int32_t choices = 1;
  bool include_usage = false;
  uint64_t ticket = 0;
  std::deque<ServeEvent> pending;
  bool done = false;
};

std::pair<std::string, int> parse_listen_address(const std::string& s) {
  std::string host = "0.0.0.0", port = s;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      raise(Err::Usage, "--http " + s + " is not HOST:PORT", "For IPv6 write [::1]:8000.");
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else if (const size_t colon = s.rfind(':'); colon != std::string::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  int p = -1;
  try {
    size_t used = 0;
    p = std::stoi(port, &used);
    if (used != port.size()) p = -1;
  } catch (const std::exception&) {
    p = -1;
  }
  if (p < 0 || p > 65535 || host.empty())
    raise(Err::Usage, "--http " + s + " is not HOST:PORT", "For example --http 0.0.0.0:8000.");
  return {host, p};
}

HttpGateway::HttpGateway(const HttpOptions& opts, const BatchModel& model, RequestHub& hub,
                         ServeMetrics& metrics)
    : opts_(opts),
      model_(model),
      hub_(hub),
      metrics_(metrics),
      server_(std::make_unique<Server>()) {
  const auto [host, port] = parse_listen_address(opts_.listen);
  host_ = host;
  const int threads = opts_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server_->set_payload_max_length(opts_.max_body_bytes);
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // and silently take half of the connections; a port in use must be an error instead.
  server_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  routes();
  port_ = port == 0 ? server_->bind_to_any_port(host_) : port;
  if (port_ < 0 || (port != 0 && !server_->bind_to_port(host_, port_)))
    raise(Err::Usage, "cannot listen on --http " + opts_.listen,
          "Give a free port on an address of this host, e.g. --http 0.0.0.0:8000.");
  server_->raise_backlog(kListenBacklog);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

HttpGateway::~HttpGateway() {
  stop();
}

void HttpGateway::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

void HttpGateway::fail(httplib::Response& res, const Error& e, int status) {
  metrics_.request_failed(e.code());
  answer_error(res, e, status);
}

void HttpGateway::answer_error(httplib::Response& res, const Error& e, int status) {
  res.status = status > 0 ? status : http_status(e.code());
  res.set_content(http_error_body(e), kJson);
}

void HttpGateway::routes() {
  httplib::Server& s = *server_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opts_.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (bearer_matches(req.get_header_value("Authorization"), opts_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    fail(res, Error(Err::Unauthorized,
                    req.has_header("Authorization")
                        ? "the Authorization header does not carry the server's API key"
                        : "the request has no Authorization header and the server needs an API key",
                    "Send `Authorization: Bearer <key>` with the key given to --api-key."));
    return httplib::Server::HandlerResponse::Handled;
  });
  // cpp-httplib's own refusals (no route, body over the limit, unreadable request) get a JSON
  // error body too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      fail(res, Error(Err::BodyTooLarge,
                      "the request body is larger than --max-request-bytes " +
                          std::to_string(opts_.max_body_bytes),
                      "Send a shorter prompt, or raise --max-request-bytes."));
    else if (res.status == 404 || res.status == 405)
      fail(res,
           Error(Err::RequestField,
                 req.method + " " + req.path.substr(0, 200) + " is not an endpoint of qmpi serve",
                 "Use POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET "
                 "/health or GET /metrics."),
           res.status);
    else
      fail(res,
           Error(Err::RequestJson,
                 "the HTTP request could not be read (status " + std::to_string(res.status) + ")"),
           res.status);
  });
  s.set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        fail(res, Error(Err::Internal, "the HTTP handler failed: " + what));
      });

  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::Chat);
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::Completion);
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json j = {{"object", "list"},
                    {"data", json::array({{{"id", opts_.model_name},
                                           {"object", "model"},
                                           {"created", unix_now()},
                                           {"owned_by", "qmpi"}}})}};
    res.set_content(j.dump(), kJson);
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const Health h = hub_.snapshot().health;
    res.status = h == Health::Ready ? 200 : 503;
    res.set_content(json{{"status", health_name(h)}}.dump(), kJson);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(hub_.snapshot(), hub_.queued()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

void HttpGateway::completions(const httplib::Request& req, httplib::Response& res,
                              Endpoint endpoint) {
  const auto arrival = Clock::now();
  auto stream = std::make_shared<Stream>();
  try {
    HttpBody parsed = parse_http_body(req.body, endpoint, "http-" + std::to_string(next_id_++));
    BatchRequest& r = parsed.request;
    stream->include_usage = parsed.include_usage;
    stream->shape.token_ids = parsed.token_ids;

    const bool streaming = r.stream;
    stream->sink = std::make_shared<Sink>(streaming, opts_.client_buffer_bytes);
    stream->choices = r.sampling.n;
    stream->shape.endpoint = endpoint;
    stream->shape.model = r.model.empty() ? opts_.model_name : r.model;
    stream->shape.created = unix_now();
    ServeRequest sr;
    sr.client_id = r.custom_id;
    sr.prompt = request_prompt_ids(r, model_);
    sr.req = std::move(r);
    sr.arrival = arrival;
    sr.sink = stream->sink;
    stream->ticket = hub_.submit(std::move(sr));
    stream->shape.id =
        (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(stream->ticket);

    if (!streaming) {
      for (;;) {
        for (ServeEvent& ev : stream->sink->take(kPollInterval)) {
          if (ev.kind == ServeEvent::Kind::Error) return answer_error(res, *ev.error);
          if (ev.kind == ServeEvent::Kind::Final) {
            res.set_content(response_body(*ev.result, *model_.tokenizer, stream->shape.token_ids),
                            kJson);
            return;
          }
        }
      }
    }
    // Wait for admission, so that a request the engine refuses gets its HTTP status.
    while (stream->pending.empty()) stream->pending = stream->sink->take(kPollInterval);
    if (stream->pending.front().kind == ServeEvent::Kind::Error)
      return answer_error(res, *stream->pending.front().error);
  } catch (const Error& e) {
    return fail(res, e);
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream](size_t, httplib::DataSink& out) {
        std::string text;
        const bool more = pump(*stream, text);
        if (!text.empty() && !out.write(text.data(), text.size())) return false;
        if (!more) out.done();
        return true;
      },
      [this, stream](bool) {
        // The client went away (or stopped reading) before the end: free its sequences.
        if (!stream->done) hub_.cancel(stream->ticket);
      });
}

// Turns the events that arrived into SSE text; false once the stream is complete.
bool HttpGateway::pump(Stream& s, std::string& out) {
  std::deque<ServeEvent> events =
      s.pending.empty() ? s.sink->take(kPollInterval) : std::exchange(s.pending, {});
  if (s.sink->overflowed()) {
    const Error e(Err::ClientTooSlow,
                  "the response fell more than " + std::to_string(opts_.client_buffer_bytes) +
                      " bytes behind the generation; the request was cancelled");
    metrics_.client_dropped();  // the request itself counts as cancelled
    hub_.cancel(s.ticket);
    s.done = true;
    out += sse_error_chunk(e);
    out += kSseDone;
    return false;
  }
  for (const ServeEvent& ev : events) {
    switch (ev.kind) {
      case ServeEvent::Kind::Accepted:
        if (s.shape.endpoint == Endpoint::Chat)
          for (int32_t i = 0; i < s.choices; ++i) out += sse_role_chunk(s.shape, i);
        break;
      case ServeEvent::Kind::Delta:
        out += sse_delta_chunk(s.shape, ev);
        break;
      case ServeEvent::Kind::Final:
        for (size_t i = 0; i < ev.result->choices.size(); ++i)
          out += sse_finish_chunk(s.shape, int32_t(i), ev.result->choices[i].finish_reason);
        if (s.include_usage) out += sse_usage_chunk(s.shape, *ev.result);
        out += kSseDone;
        s.done = true;
        return false;
      case ServeEvent::Kind::Error:
        out += sse_error_chunk(*ev.error);
        out += kSseDone;
        s.done = true;
        return false;
    }
  }
  return true;
}

}  // namespace qmpi
