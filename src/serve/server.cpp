#include "serve/server.h"

#include <csignal>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "engine/replica_scheduler.h"
#include "model/config.h"
#include "parallel/watchdog.h"
#include "requests/model_tokenizer.h"
#include "serve/http_gateway.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"
#include "text/chat_template.h"

namespace qmpi {
namespace {

constexpr auto kFlushOnExit = std::chrono::milliseconds(2000);
constexpr auto kFlushOnError = std::chrono::milliseconds(500);

// A client that hangs up must not kill the server: a write to its socket raises SIGPIPE unless
// the library asks the kernel not to (Asio does on Linux; be sure for every front).
void ignore_sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace

// Declared in the order they are built: the fronts hold references to the model facts, the hub
// and the metrics.
struct Server::Fronts {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat;
  ModelFacts model;  // what the fronts check requests with, before the engine exists
  RequestHub hub;
  ServeMetrics metrics;
  std::unique_ptr<ZmqBroker> broker;
  std::unique_ptr<HttpGateway> gateway;

  Fronts(int64_t max_queue, const std::string& model_name) : hub(max_queue), metrics(model_name) {}
};

Server::Server(ServerOptions opts) : opts_(std::move(opts)) {}

Server::~Server() {
  set_abort_hook(nullptr);
  stop(std::chrono::milliseconds(0));
}

void Server::start(const ModelSource& source) {
  ignore_sigpipe();
  std::filesystem::path dir = source.files();
  if (source.path.empty() && !source.config_path.empty() && !std::filesystem::is_directory(dir))
    dir = dir.parent_path();
  if (dir.empty()) raise(Err::Usage, "--model is required");
  fronts_ = std::make_unique<Fronts>(opts_.max_queue, opts_.loop.model_name);
  Fronts& f = *fronts_;
  f.tokenizer = load_model_tokenizer(dir.string());  // folder, beside config.json, or in a .h5
  f.chat = chat_template_for(dir.string(), source.chat_template,
                             jinja::parse_limits(source.chat_template_limits));
  f.model.tokenizer = f.tokenizer.get();
  f.model.chat = f.chat.get();
  f.model.vocab_size = ModelConfig::load(dir.string()).vocab_size;
  f.model.reasoning_parser = opts_.reasoning_parser;
  f.model.served_names = opts_.served_names;
  f.model.adapter_names = opts_.adapter_names;
  f.broker = std::make_unique<ZmqBroker>(opts_.zmq, f.model, f.hub, f.metrics);
  spdlog::info("zmq: listening on {}", f.broker->endpoint());
  if (!opts_.http.listen.empty()) {
    f.gateway = std::make_unique<HttpGateway>(opts_.http, f.model, f.hub, f.metrics);
    spdlog::info("http: listening on {}:{}", f.gateway->host(), f.gateway->port());
    if (opts_.http.api_key.empty())
      spdlog::warn(
          "http: no API key: anyone who can reach {}:{} may use the server (give "
          "--api-key-file or QMPI_API_KEY)",
          f.gateway->host(), f.gateway->port());
  }
  // A rank that stops answering ends the job through the comm watchdog (MPI_Abort); before
  // that, every request in flight hears why, and the fronts get a moment to send it.
  set_abort_hook([this](const Error& e) {
    fronts_->hub.fail_all(e);
    stop(kFlushOnError);
  });
}

int Server::run(Engine& engine) {
  if (!fronts_)
    raise(Err::Internal, "MPI rank 0 is not the launcher's rank 0; the fronts are not open");
  Fronts& f = *fronts_;
  try {
    engine.executor().set_valid_vocab(f.tokenizer->vocab_size());
    const ModelFacts model = ModelFacts::from(engine, f.model);
    // One scheduler per data-parallel replica (one with --dp 1); an idle replica hears from
    // rank 0 well within --comm-timeout.
    ReplicaScheduler sched(engine.replica_runners(), engine.replica_blocks(),
                           engine.scheduler_config(), engine.options().parallel.comm_timeout_s / 4);
    ServeLoop loop(opts_.loop, model, sched, f.hub, f.metrics, &engine.executor().times());
    loop.run([&] { return engine.executor().poll_stop(); });
    sched.log_summary();
    stop(kFlushOnExit);
    spdlog::info("served {} requests; stopped cleanly", f.metrics.counters().ok);
    return replica_loss_exit_code(sched);
  } catch (const Error& e) {
    // The requests in flight got the error; give the fronts a moment to send it.
    stop(kFlushOnError);
    std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
    return e.exit_code();
  }
}

void Server::stop(std::chrono::milliseconds flush) {
  if (!fronts_) return;
  if (fronts_->gateway) fronts_->gateway->stop(flush);
  if (fronts_->broker) fronts_->broker->stop(flush);
}

}  // namespace qmpi
