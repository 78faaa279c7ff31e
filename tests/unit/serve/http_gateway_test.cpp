// The HTTP front over real sockets on 127.0.0.1, with the test as the engine (it takes requests
// from the hub and delivers their events by hand): routes, API key, body limits (chunked too),
// unreadable requests, streamed and whole responses, keep-alive, a slow reader cancelled with
// client-too-slow while others are served, a hang-up cancelled, slowloris timeouts, a port in use
// named with the system's reason, many idle connections, and a stop that lets streams finish.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "../text/text_test_util.h"
#include "serve/http_gateway.h"
#include "text/chat_template.h"

namespace qmpi {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

// A blocking TCP client with a deadline on every read.
class Client {
 public:
  explicit Client(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // False when the peer refused it (reset, closed).
  bool send(const std::string& s) {
    size_t at = 0;
    while (at < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + at, s.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += size_t(n);
    }
    return true;
  }
  // Bytes received within `wait` (may be empty); sets eof when the peer closed.
  std::string recv_some(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(wait.count())) <= 0) return "";
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof = true;
      return "";
    }
    return std::string(buf, size_t(n));
  }
  // Reads until `pred(data)` holds, the peer closes, or `wait` passes.
  template <class Pred>
  bool read_until(Pred pred, std::chrono::milliseconds wait = 5000ms) {
    const auto deadline = Clock::now() + wait;
    while (!pred(data)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || eof) return false;
      data += recv_some(std::min(left, 200ms));
    }
    return true;
  }
  bool closed_by_peer(std::chrono::milliseconds wait) {
    read_until([](const std::string&) { return false; }, wait);
    return eof;
  }

  std::string data;
  bool eof = false;

 private:
  int fd_ = -1;
  bool connected_ = false;
};

struct Response {
  int status = 0;
  std::string head;
  std::string body;
  bool chunked = false;
};

// Parses one response from the front of `data` (removing it); nullopt while incomplete.
std::optional<Response> take_response(std::string& data) {
  const size_t head_end = data.find("\r\n\r\n");
  if (head_end == std::string::npos) return std::nullopt;
  Response r;
  r.head = data.substr(0, head_end + 2);
  r.status = std::atoi(r.head.c_str() + 9);
  size_t at = head_end + 4;
  std::string lower = r.head;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("transfer-encoding: chunked") != std::string::npos) {
    r.chunked = true;
    for (;;) {
      const size_t eol = data.find("\r\n", at);
      if (eol == std::string::npos) return std::nullopt;
      const size_t n = std::stoul(data.substr(at, eol - at), nullptr, 16);
      if (data.size() < eol + 2 + n + 2) return std::nullopt;
      r.body += data.substr(eol + 2, n);
      at = eol + 2 + n + 2;
      if (n == 0) break;
    }
  } else {
    size_t length = 0;
    if (const size_t cl = lower.find("content-length: "); cl != std::string::npos)
      length = std::stoul(lower.substr(cl + 16));
    if (data.size() < at + length) return std::nullopt;
    r.body = data.substr(at, length);
    at += length;
  }
  data.erase(0, at);
  return r;
}

Response read_response(Client& c, std::chrono::milliseconds wait = 5000ms) {
  std::optional<Response> r;
  c.read_until([&](std::string& d) { return (r = take_response(d)).has_value(); }, wait);
  EXPECT_TRUE(r.has_value()) << "no complete response; got: " << c.data.substr(0, 300);
  return r.value_or(Response{});
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

std::string qmpi_code(const Response& r) {
  try {
    return json::parse(r.body)["error"]["qmpi_code"].get<std::string>();
  } catch (const std::exception&) {
    return "not an error body: " + r.body.substr(0, 200);
  }
}

ServeEvent event(ServeEvent::Kind kind) {
  ServeEvent e;
  e.kind = kind;
  return e;
}

ServeEvent delta(const std::string& text) {
  ServeEvent e = event(ServeEvent::Kind::Delta);
  e.text = text;
  e.token_ids = {int32_t(text.size())};
  return e;
}

ServeEvent final_event(const std::string& text, const std::string& reason = "length") {
  ServeEvent e = event(ServeEvent::Kind::Final);
  auto out = std::make_shared<RequestOutput>();
  out->endpoint = Endpoint::Completion;
  out->prompt_tokens = 3;
  out->choices.resize(1);
  out->choices[0].text = text;
  out->choices[0].tokens = {1, 2};
  out->choices[0].finish_reason = reason;
  e.result = out;
  return e;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

class HttpGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.tokenizer = &bytes_tokenizer();
    model_.chat = &chat_;
    model_.vocab_size = 256;
    model_.max_model_len = 400;
    opts_.listen = "127.0.0.1:0";
    opts_.model_name = "fake";
    opts_.max_body_bytes = 4096;
    hub_.set_health(Health::Ready);
  }
  void start() { gw_ = std::make_unique<HttpGateway>(opts_, model_, hub_, metrics_); }
  int port() const { return gw_->port(); }

  // The next request the front submitted (the engine's side of the hub).
  ServeRequest next_request(std::chrono::milliseconds wait = 5000ms) {
    const auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline) {
      RequestHub::Work w = hub_.take(std::chrono::milliseconds(50));
      for (uint64_t t : w.cancels) cancels_.push_back(t);
      for (ServeRequest& r : w.requests) pending_.push_back(std::move(r));
      if (!pending_.empty()) {
        ServeRequest r = std::move(pending_.front());
        pending_.erase(pending_.begin());
        return r;
      }
    }
    ADD_FAILURE() << "no request reached the hub";
    return {};
  }
  bool cancelled(uint64_t ticket, std::chrono::milliseconds wait = 5000ms) {
    const auto deadline = Clock::now() + wait;
    for (;;) {
      for (uint64_t t : cancels_)
        if (t == ticket) return true;
      if (Clock::now() >= deadline) return false;
      RequestHub::Work w = hub_.take(std::chrono::milliseconds(50));
      for (uint64_t t : w.cancels) cancels_.push_back(t);
      for (ServeRequest& r : w.requests) pending_.push_back(std::move(r));
    }
  }
  void finish(ServeRequest& r, ServeEvent last) {
    r.sink->deliver(std::move(last));
    hub_.finished(r.ticket);
  }

  Qwen25ChatTemplate chat_;
  ModelFacts model_;
  HttpOptions opts_;
  RequestHub hub_{64};
  ServeMetrics metrics_;
  std::unique_ptr<HttpGateway> gw_;
  std::vector<uint64_t> cancels_;
  std::vector<ServeRequest> pending_;
};

TEST_F(HttpGatewayTest, HealthMetricsModelsOnOneKeptAliveConnection) {
  hub_.set_health(Health::Loading);
  start();
  Client c(port());
  ASSERT_TRUE(c.send(get("/health")));
  Response r = read_response(c);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["status"], "loading");
  hub_.set_health(Health::Ready);
  // Pipelined: both requests sent before either answer is read.
  ASSERT_TRUE(c.send(get("/health?x=1") + get("/v1/models")));
  r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["status"], "ready");
  r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "fake");
  ASSERT_TRUE(c.send(get("/metrics")));
  r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("text/plain"), std::string::npos);
  EXPECT_NE(r.body.find("qmpi_ready 1"), std::string::npos) << r.body.substr(0, 500);
  EXPECT_EQ(gw_->open_connections(), 1u);
}

TEST_F(HttpGatewayTest, ApiKeyThenRoute) {
  opts_.api_key = "k3y";
  start();
  Client c(port());
  ASSERT_TRUE(c.send(get("/v1/models")));
  Response r = read_response(c);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(qmpi_code(r), "QM507");
  EXPECT_NE(r.head.find("WWW-Authenticate: Bearer"), std::string::npos) << r.head;
  ASSERT_TRUE(c.send(get("/v1/models", "Authorization: Bearer k3y\r\n")));
  EXPECT_EQ(read_response(c).status, 200);
  ASSERT_TRUE(c.send(get("/v1/completions", "Authorization: Bearer k3y\r\n")));
  r = read_response(c);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(qmpi_code(r), "QM523") << "GET of a POST route: route-not-found";
  ASSERT_TRUE(c.send(get("/admin") + get("/health")));
  EXPECT_EQ(read_response(c).status, 404) << "outside /v1/ no key is asked";
  EXPECT_EQ(read_response(c).status, 200) << "/health stays open for probes";
  // A refused request with a body: answered, then the connection closes without a reset.
  Client d(port());
  ASSERT_TRUE(
      d.send(post("/v1/completions", R"({"prompt": "x"})", "Authorization: Bearer no\r\n")));
  r = read_response(d);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
  EXPECT_TRUE(d.closed_by_peer(2000ms));
}

TEST_F(HttpGatewayTest, BodiesOverTheLimitAreRefusedWhileReading) {
  start();
  // Declared too large: answered at once, the body never read.
  Client c(port());
  ASSERT_TRUE(
      c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{"));
  Response r = read_response(c);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(qmpi_code(r), "QM506");

  // Chunked: the limit holds however the body is cut. Send up to 8 MiB in 64 KiB chunks; the
  // answer must come after about --max-request-bytes (4 KiB here), long before the end.
  Client k(port());
  ASSERT_TRUE(
      k.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  size_t sent = 0;
  std::optional<Response> answer;
  while (sent < (size_t(8) << 20) && !answer) {
    if (!k.send(chunk)) break;
    sent += 0x10000;
    k.data += k.recv_some(0ms);
    answer = take_response(k.data);
  }
  if (!answer) {
    k.read_until([&](std::string& d) { return (answer = take_response(d)).has_value(); });
  }
  ASSERT_TRUE(answer.has_value()) << "no answer after " << sent << " bytes of chunked body";
  EXPECT_EQ(answer->status, 413);
  EXPECT_EQ(qmpi_code(*answer), "QM506");
  EXPECT_LT(sent, size_t(8) << 20) << "the answer came before the whole body was sent";

  // Chunked within the limit is a request like any other.
  Client ok(port());
  const std::string body = R"({"prompt": "hello", "max_tokens": 2})";
  ASSERT_TRUE(
      ok.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
              std::to_string(5) + "\r\n" + body.substr(0, 5) + "\r\n" + ([&] {
                char hex[16];
                std::snprintf(hex, sizeof hex, "%zx", body.size() - 5);
                return std::string(hex);
              })() +
              "\r\n" + body.substr(5) + "\r\n0\r\n\r\n"));
  ServeRequest req = next_request();
  EXPECT_EQ(req.prompt.size(), 5u) << "\"hello\" in the byte tokenizer";
  finish(req, final_event("ab"));
  r = read_response(ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "ab");
  EXPECT_EQ(pending_.size(), 0u) << "no refused body reached the engine";
}

TEST_F(HttpGatewayTest, UnreadableRequestsAre4xx) {
  opts_.max_header_bytes = 2048;
  start();
  for (const std::string& raw :
       {std::string("GARBAGE\r\n\r\n"),
        std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
        std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + std::string(64, '\0')}) {
    Client c(port());
    ASSERT_TRUE(c.send(raw));
    const Response r = read_response(c);
    EXPECT_EQ(r.status, 400) << raw.substr(0, 20);
    EXPECT_EQ(qmpi_code(r), "QM500");
  }
  Client big(port());
  ASSERT_TRUE(big.send("GET /health HTTP/1.1\r\nX-Long: " + std::string(4000, 'a') + "\r\n\r\n"));
  EXPECT_EQ(read_response(big).status, 431);
}

// RFC 9112 sections 3.2, 6.1 and 6.3: a head that frames its request ambiguously is refused
// and the connection closed, so the bytes after it (a smuggled request here) are never read as
// a request.
TEST_F(HttpGatewayTest, AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  start();
  const std::string body = R"({"prompt": "x"})";
  const std::string smuggled = get("/health");
  const std::string cl = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  struct Case {
    std::string head;
    int status;
    const char* code;
  };
  for (const Case& k : std::vector<Case>{
           {"Transfer-Encoding: chunked\r\n" + cl, 400, "QM500"},
           {cl + "Transfer-Encoding: chunked\r\n", 400, "QM500"},
           {"Transfer-Encoding: xchunked\r\n" + cl, 400, "QM500"},
           {cl + "Transfer-Encoding: chunked, identity\r\n", 400, "QM500"},
           {"Transfer-Encoding: xchunked\r\n", 400, "QM500"},
           {"Transfer-Encoding: gzip, chunked\r\n", 501, "QM522"},
           {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400, "QM500"},
           {"Content-Length: 3\r\nContent-Length: 4\r\n", 400, "QM500"},
           {"Host: y\r\n" + cl, 400, "QM500"}}) {
    Client c(port());
    ASSERT_TRUE(
        c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + k.head + "\r\n" + body + smuggled));
    const Response r = read_response(c);
    EXPECT_EQ(r.status, k.status) << k.head;
    EXPECT_EQ(qmpi_code(r), k.code) << k.head;
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << k.head;
    EXPECT_TRUE(c.closed_by_peer(7000ms)) << k.head;
    EXPECT_EQ(c.data.find("HTTP/1.1"), std::string::npos) << "the smuggled request was answered";
  }
  Client no_host(port());
  ASSERT_TRUE(no_host.send("GET /health HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(read_response(no_host).status, 400) << "HTTP/1.1 without Host";
  Client old(port());
  ASSERT_TRUE(old.send("GET /health HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(read_response(old).status, 200) << "HTTP/1.0 needs no Host";
  EXPECT_TRUE(pending_.empty());
}

TEST_F(HttpGatewayTest, HeadAnswersGetsHeadersAndAbsoluteFormIsRouted) {
  start();
  Client c(port());
  ASSERT_TRUE(c.send(get("/v1/models")));
  const Response full = read_response(c);
  ASSERT_EQ(full.status, 200);
  ASSERT_TRUE(c.send("HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" + get("/health")));
  ASSERT_TRUE(c.read_until([](const std::string& d) { return d.find("\r\n\r\n") != d.npos; }));
  const std::string head = c.data.substr(0, c.data.find("\r\n\r\n") + 4);
  c.data.erase(0, head.size());
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(full.body.size())), std::string::npos)
      << "HEAD's Content-Length is GET's: " << head;
  // No body followed: the next bytes are the pipelined GET's answer.
  const Response next = read_response(c);
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(json::parse(next.body)["status"], "ready");
  ASSERT_TRUE(c.send("GET http://127.0.0.1:" + std::to_string(port()) +
                     "/health?probe=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(read_response(c).status, 200) << "absolute form";
}

TEST_F(HttpGatewayTest, StreamedThenWholeResponsesOnOneConnection) {
  start();
  Client c(port());
  ASSERT_TRUE(c.send(post("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "hi"}], "stream": true,
                              "stream_options": {"include_usage": true}})")));
  ServeRequest req = next_request();
  EXPECT_EQ(req.client_id.rfind("http-", 0), 0u);
  req.sink->deliver(event(ServeEvent::Kind::Accepted));
  // The head and the role chunk go out as soon as the engine took the request.
  ASSERT_TRUE(c.read_until([](const std::string& d) { return d.find("assistant") != d.npos; }));
  EXPECT_NE(c.data.find("text/event-stream"), std::string::npos);
  req.sink->deliver(delta("Hel"));
  req.sink->deliver(delta("lo"));
  finish(req, final_event("Hello"));
  Response r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.chunked);
  const auto ev = sse_data(r.body);
  ASSERT_EQ(ev.size(), 6u) << r.body;  // role, 2 deltas, finish, usage, [DONE]
  EXPECT_EQ(json::parse(ev[0])["id"], "chatcmpl-" + std::to_string(req.ticket));
  EXPECT_EQ(json::parse(ev[1])["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(json::parse(ev[2])["choices"][0]["delta"]["content"], "lo");
  EXPECT_EQ(json::parse(ev[3])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(ev[4])["usage"]["completion_tokens"], 2);
  EXPECT_EQ(ev[5], "[DONE]");

  // The same connection, a request that does not stream; deltas are not its business.
  ASSERT_TRUE(c.send(post("/v1/completions", R"({"prompt": "x", "return_token_ids": true})")));
  req = next_request();
  req.sink->deliver(event(ServeEvent::Kind::Accepted));
  req.sink->deliver(delta("a"));
  finish(req, final_event("a"));
  r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["object"], "text_completion");
  EXPECT_EQ(json::parse(r.body)["choices"][0]["token_ids"], json({1, 2}));

  // A request the engine refuses before it starts is an HTTP error, streamed or not.
  ASSERT_TRUE(c.send(post("/v1/completions", R"({"prompt": "x", "stream": true})")));
  req = next_request();
  ServeEvent refusal = event(ServeEvent::Kind::Error);
  refusal.error = Error(Err::PromptTooLong, "too long");
  finish(req, refusal);
  r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(qmpi_code(r), "QM502");
  // A body the front refuses never reaches the engine.
  ASSERT_TRUE(c.send(post("/v1/completions", R"({"prompt": "x", "temprature": 1})")));
  r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(qmpi_code(r), "QM501");
  ASSERT_TRUE(c.send(post("/v1/completions", "")));
  EXPECT_EQ(qmpi_code(read_response(c)), "QM500");
  EXPECT_TRUE(pending_.empty());
  EXPECT_EQ(metrics_.counters().failed, 2) << "the engine counts its own refusals, not the front";
}

TEST_F(HttpGatewayTest, ExpectContinueGetsA100First) {
  start();
  Client c(port());
  const std::string body = R"({"prompt": "x"})";
  ASSERT_TRUE(c.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n"));
  ASSERT_TRUE(c.read_until([](const std::string& d) { return d.find("\r\n\r\n") != d.npos; }));
  EXPECT_EQ(c.data.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << c.data;
  c.data.clear();
  ASSERT_TRUE(c.send(body));
  ServeRequest req = next_request();
  finish(req, final_event("y"));
  EXPECT_EQ(read_response(c).status, 200);
}

TEST_F(HttpGatewayTest, ASlowReaderIsCancelledAndNobodyWaitsForIt) {
  opts_.client_buffer_bytes = 64 << 10;
  start();
  Client slow(port(), 4096);  // a small receive buffer, never read until the end
  ASSERT_TRUE(slow.send(post("/v1/completions", R"({"prompt": "x", "stream": true})")));
  ServeRequest req = next_request();
  req.sink->deliver(event(ServeEvent::Kind::Accepted));
  // Far more text than the kernel's buffers and --client-buffer-bytes hold together.
  const std::string piece(4000, 'z');
  bool saw_cancel = false;
  for (int i = 0; i < 4000 && !saw_cancel; ++i) {
    req.sink->deliver(delta(piece));  // never blocks the engine
    if (i % 50 == 49) saw_cancel = cancelled(req.ticket, 20ms);
  }
  EXPECT_TRUE(saw_cancel || cancelled(req.ticket)) << "the slow reader's request was cancelled";
  // Others are served meanwhile.
  Client probe(port());
  const auto t0 = Clock::now();
  ASSERT_TRUE(probe.send(get("/health")));
  EXPECT_EQ(read_response(probe).status, 200);
  EXPECT_LT(Clock::now() - t0, 2s);
  finish(req, final_event("", "cancelled"));
  // The slow reader, reading at last, finds the error event at the end of its stream.
  std::optional<Response> r;
  slow.read_until([&](std::string& d) { return (r = take_response(d)).has_value(); }, 10000ms);
  ASSERT_TRUE(r.has_value());
  const auto ev = sse_data(r->body);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(json::parse(ev[ev.size() - 2])["error"]["qmpi_code"], "QM508");
  EXPECT_NE(metrics_.render(hub_.snapshot(), 0).find("\nqmpi_clients_dropped_total 1\n"),
            std::string::npos)
      << "the stream cut with QM508 is counted as a dropped client";
}

TEST_F(HttpGatewayTest, AHangUpMidStreamCancels) {
  start();
  auto c = std::make_unique<Client>(port());
  ASSERT_TRUE(c->send(post("/v1/completions", R"({"prompt": "x", "stream": true})")));
  ServeRequest req = next_request();
  req.sink->deliver(event(ServeEvent::Kind::Accepted));
  req.sink->deliver(delta("a"));
  ASSERT_TRUE(c->read_until([](const std::string& d) { return d.find("data:") != d.npos; }));
  c.reset();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    req.sink->deliver(delta("b"));  // the write after the hang-up fails
    gone = cancelled(req.ticket, 50ms);
  }
  EXPECT_TRUE(gone);
}

TEST_F(HttpGatewayTest, AHangUpBeforeTheAnswerCancelsToo) {
  start();
  // Waiting in the queue (nothing written yet), streamed or not: the close alone is noticed.
  for (const char* stream : {"false", "true"}) {
    auto c = std::make_unique<Client>(port());
    ASSERT_TRUE(c->send(
        post("/v1/completions", std::string(R"({"prompt": "x", "stream": )") + stream + "}")));
    ServeRequest req = next_request();
    c.reset();
    EXPECT_TRUE(cancelled(req.ticket)) << "stream " << stream;
  }
  // A client that pipelines its next request is still there: its answer comes.
  Client p(port());
  ASSERT_TRUE(p.send(post("/v1/completions", R"({"prompt": "x"})") + get("/health")));
  ServeRequest req = next_request();
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(cancelled(req.ticket, 100ms));
  finish(req, final_event("y"));
  EXPECT_EQ(read_response(p).status, 200);
  EXPECT_EQ(read_response(p).status, 200);
}

TEST_F(HttpGatewayTest, SlowlorisAndIdleConnectionsTimeOut) {
  opts_.timeouts.header = 400ms;
  opts_.timeouts.idle = 600ms;
  start();
  Client loris(port());
  ASSERT_TRUE(loris.send("GET /health HTTP/1.1\r\nX-a: "));
  Client idle(port());
  const auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {  // one byte now and then, never the end of the head
    std::this_thread::sleep_for(100ms);
    loris.send("b");
  }
  EXPECT_TRUE(loris.closed_by_peer(3000ms)) << "a head that never ends is cut off";
  EXPECT_TRUE(idle.closed_by_peer(3000ms)) << "an idle connection is closed";
  EXPECT_LT(Clock::now() - t0, 4s);
  for (int i = 0; i < 100 && gw_->open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gw_->open_connections(), 0u);
}

TEST_F(HttpGatewayTest, APortInUseIsNamedWithTheSystemsReason) {
  start();
  HttpOptions again = opts_;
  again.listen = "127.0.0.1:" + std::to_string(port());
  try {
    HttpGateway second(again, model_, hub_, metrics_);
    FAIL() << "a second server bound the same port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ListenFailed);
    EXPECT_NE(e.message().find("in use"), std::string::npos) << e.message();
    EXPECT_EQ(e.render().find("misspelled"), std::string::npos) << e.render();
  }
}

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST_F(HttpGatewayTest, ManyIdleConnectionsCostLittleAndHealthStaysFast) {
  opts_.threads = 1;
  start();
  constexpr int kConns = 400;  // within the default 1024 open files, both ends in this process
  std::vector<std::unique_ptr<Client>> conns;
  const long before = rss_kib();
  for (int i = 0; i < kConns; ++i) {
    conns.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(conns.back()->connected());
    if (i % 2) conns.back()->send("GET /health HTTP/1.1\r\n");  // half of them mid-head
  }
  for (int i = 0; i < 200 && gw_->open_connections() < size_t(kConns); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gw_->open_connections(), size_t(kConns));
  const long after = rss_kib();
  const double per_conn = double(after - before) / kConns;
  std::printf("  %d open connections: rank 0 RSS +%ld KiB, %.1f KiB each (client ends included)\n",
              kConns, after - before, per_conn);
  EXPECT_LT(per_conn, 64.0) << "an idle connection costs a few KiB, not a thread";
  Client probe(port());
  const auto t0 = Clock::now();
  ASSERT_TRUE(probe.send(get("/health")));
  EXPECT_EQ(read_response(probe).status, 200);
  EXPECT_LT(Clock::now() - t0, 2s) << "a generous bound for a loaded machine";
}

TEST_F(HttpGatewayTest, StopLetsStreamsFinishAndClosesIdleConnections) {
  start();
  Client idle(port());
  Client c(port());
  ASSERT_TRUE(c.send(post("/v1/completions", R"({"prompt": "x", "stream": true})")));
  ServeRequest req = next_request();
  req.sink->deliver(event(ServeEvent::Kind::Accepted));
  req.sink->deliver(delta("a"));
  std::thread stopper([&] { gw_->stop(5000ms); });
  EXPECT_TRUE(idle.closed_by_peer(3000ms));
  req.sink->deliver(delta("b"));
  finish(req, final_event("ab"));
  const Response r = read_response(c);
  stopper.join();
  const auto ev = sse_data(r.body);
  ASSERT_GE(ev.size(), 3u) << r.body;
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_TRUE(c.closed_by_peer(2000ms)) << "no keep-alive past the stop";
  Client late(port());
  EXPECT_FALSE(late.connected() && late.send(get("/health")) &&
               late.read_until([](const std::string& d) { return !d.empty(); }, 500ms));
}

}  // namespace
}  // namespace qmpi
