#include "serve/http_gateway.h"

#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "core/errors.h"
#include "serve/http_connection.h"

namespace qmpi {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn
// accept() failing for want of descriptors would fail again at once: wait this long instead of
// spinning, while the connections open go on being served.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

}  // namespace

struct HttpGateway::Impl {
  Impl(const HttpOptions& opts, const ModelFacts& model, RequestHub& hub, ServeMetrics& metrics)
      : front(opts, model, hub, metrics),
        ioc(opts.threads),
        work(ioc.get_executor()),
        acceptor(net::make_strand(ioc)),
        retry(acceptor.get_executor()) {}

  void accept();

  // Declared first so that it outlives the handlers the io_context still holds when destroyed.
  HttpFront front;
  net::io_context ioc;
  // Keeps the I/O threads running while no operation is pending: a connection waiting for the
  // engine has none, and once the acceptor closes (stop) nothing else may be.
  net::executor_work_guard<net::io_context::executor_type> work;
  tcp::acceptor acceptor;
  net::steady_timer retry;
  std::vector<std::thread> threads;
  bool accept_failing = false;  // logged once per run of failures
};

void HttpGateway::Impl::accept() {
  acceptor.async_accept(
      net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
        if (!acceptor.is_open()) return;
        if (ec) {
          if (!std::exchange(accept_failing, true))
            spdlog::warn("http: cannot accept connections ({}; {} open); retrying", ec.message(),
                         front.connections.size());
          retry.expires_after(kAcceptRetry);
          retry.async_wait([this](boost::system::error_code e) {
            if (!e) accept();
          });
          return;
        }
        accept_failing = false;
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks are small: send them now
        std::make_shared<HttpConnection>(std::move(socket), front)->start();
        accept();
      });
}

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

HttpGateway::HttpGateway(const HttpOptions& opts, const ModelFacts& model, RequestHub& hub,
                         ServeMetrics& metrics)
    : impl_(std::make_unique<Impl>(opts, model, hub, metrics)) {
  const auto [host, port] = parse_listen_address(opts.listen);
  host_ = host;
  Impl& m = *impl_;
  boost::system::error_code ec;
  const auto fail = [&](const char* step) {
    raise(Err::ListenFailed,
          "cannot listen on --http " + opts.listen + ": " + step + " failed: " + ec.message(),
          "Stop the process that holds the port (`ss -ltnp 'sport = :" + std::to_string(port) +
              "'` names it) or give another port (0 picks a free one); the host must be an "
              "address of this machine, e.g. 0.0.0.0.");
  };
  tcp::resolver resolver(m.ioc);
  const auto found = resolver.resolve(host, std::to_string(port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) fail("resolving the host");
  const tcp::endpoint ep = found.begin()->endpoint();
  m.acceptor.open(ep.protocol(), ec);
  if (ec) fail("socket()");
  // Lets a restarted server bind while its old connections sit in TIME_WAIT; unlike
  // SO_REUSEPORT it never lets a second server share a port that is listened on.
  m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  m.acceptor.bind(ep, ec);
  if (ec) fail("bind()");
  m.acceptor.listen(kListenBacklog, ec);
  if (ec) fail("listen()");
  port_ = m.acceptor.local_endpoint(ec).port();
  m.accept();
  for (int i = 0; i < opts.threads; ++i) m.threads.emplace_back([&m] { m.ioc.run(); });
}

HttpGateway::~HttpGateway() {
  stop(std::chrono::milliseconds(0));
}

size_t HttpGateway::open_connections() const {
  return impl_->front.connections.size();
}

void HttpGateway::stop(std::chrono::milliseconds flush) {
  Impl& m = *impl_;
  if (m.threads.empty()) return;
  m.front.stopping = true;
  net::post(m.acceptor.get_executor(), [&m] {
    boost::system::error_code ignored;
    m.acceptor.close(ignored);
    m.retry.cancel();
  });
  m.front.connections.shut_all();
  if (!m.front.connections.wait_empty(std::chrono::steady_clock::now() + flush) &&
      flush.count() > 0)
    spdlog::warn("http: closing {} connections whose responses did not finish in {} ms",
                 m.front.connections.size(), flush.count());
  m.front.prep.join();
  m.work.reset();
  m.ioc.stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  m.front.connections.clear();
}

}  // namespace qmpi
