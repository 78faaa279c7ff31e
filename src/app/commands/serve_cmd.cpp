// qmpi serve: an online server over the whole mesh (docs/protocol.md). Rank 0
// opens the ZeroMQ broker (and the HTTP front) before the engine is built, so clients can ask
// for health while the ranks load; then its MPI thread runs the serving loop and the other ranks
// serve its steps. SIGTERM drains: the requests in flight finish, then every rank exits 0. A
// SIGTERM from Open MPI's launcher (ending the job: a rank died, or mpirun was interrupted)
// leaves a second before its SIGKILL, so the requests in flight get an error at once instead.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "core/byte_size.h"
#include "engine/replica_scheduler.h"
#include "io/h5_checkpoint.h"
#include "parallel/launcher.h"
#include "parallel/signals.h"
#include "parallel/watchdog.h"
#include "serve/api_key.h"
#include "serve/http_gateway.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"
#include "serve/serve_loop.h"
#include "serve/zmq_broker.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace qmpi {
namespace {

constexpr auto kFlushOnExit = std::chrono::milliseconds(2000);

std::string model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  return is_h5_path(p.string()) ? p.stem().string() : p.filename().string();
}

// What the fronts need before the engine exists: the tokenizer, the chat template and the
// vocabulary size, read from the model's files on rank 0.
struct FrontFiles {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat;
  ModelFacts model;
};

FrontFiles load_front_files(const ModelSource& m) {
  FrontFiles f;
  std::filesystem::path dir = m.files();
  if (m.path.empty() && !m.config_path.empty() && !std::filesystem::is_directory(dir))
    dir = dir.parent_path();
  if (dir.empty()) raise(Err::Usage, "--model is required");
  f.tokenizer = load_model_tokenizer(dir.string());  // folder, beside config.json, or in a .h5
  f.chat = chat_template_for(dir.string(), m.chat_template,
                             jinja::parse_limits(m.chat_template_limits));
  f.model.tokenizer = f.tokenizer.get();
  f.model.chat = f.chat.get();
  f.model.vocab_size = ModelConfig::load(dir.string()).vocab_size;
  return f;
}

// --http HOST:PORT, else --host and --port (vLLM's), unless --no-http; "" when off.
std::string http_listen_address(const std::string& http, const std::string& host, int port,
                                bool off, const po::variables_map& vm) {
  const bool host_port = !vm["host"].defaulted() || !vm["port"].defaulted();
  if (off && (!http.empty() || host_port))
    raise(Err::Usage,
          "--no-http turns the HTTP API off; it cannot go with --http, --host or --port");
  if (!http.empty() && host_port)
    raise(Err::Usage, "give --http HOST:PORT or --host/--port, not both");
  if (off) return {};
  if (!http.empty()) return http;
  if (port < 0 || port > 65535) raise(Err::Usage, "--port must be in [0, 65535]");
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// vLLM's: every 10 s, or VLLM_LOG_STATS_INTERVAL seconds.
std::chrono::milliseconds stats_interval() {
  const char* env = std::getenv("VLLM_LOG_STATS_INTERVAL");
  char* end = nullptr;
  const double s = env ? std::strtod(env, &end) : 10.0;
  if (env && (end == env || *end != '\0' || !(s > 0) || s > 86400))
    raise(Err::Usage, std::string("VLLM_LOG_STATS_INTERVAL=") + env + " is not a number of seconds",
          "Set it to the seconds between stats lines (e.g. 10), or unset it.");
  return std::chrono::milliseconds(int64_t(s * 1000));
}

// A client that hangs up must not kill the server: a write to its socket raises SIGPIPE unless
// the library asks the kernel not to (Asio does on Linux; be sure for every front).
void ignore_sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace

int cmd_serve(const Args& args) {
  EngineConfig config = engine_config_for(Command::Serve);
  ServeLoopOptions loop_opts;
  BrokerOptions zmq;
  HttpOptions http;
  ApiKeySources key_sources;
  int64_t max_queue = 256;
  std::vector<std::string> served_names;
  std::string http_host;
  int http_port = 8000;
  bool no_http = false;
  std::string max_request, client_buffer;
  const auto http_s = [](std::chrono::milliseconds t) { return double(t.count()) / 1000; };
  double header_s = 0, body_s = 0;
  po::options_description desc = engine_options(config);
  po::options_description s("serve");
  s.add_options()(
      "zmq", po::value(&zmq.endpoint)->default_value("tcp://127.0.0.1:5555"),
      "ZeroMQ ROUTER endpoint of the request broker (tcp://HOST:PORT; port * picks a free one; "
      "tcp://0.0.0.0:5555 for every interface). ZeroMQ clients are not authenticated: keep it "
      "on a trusted network")(
      "http", po::value(&http.listen),
      "serve the OpenAI-compatible HTTP API on HOST:PORT (port 0 picks a free one); default: "
      "--host:--port")(
      "host", po::value(&http_host)->default_value("127.0.0.1"),
      "address of the HTTP API (vLLM's --host); 0.0.0.0 listens on every interface")(
      "port", po::value(&http_port)->default_value(8000), "port of the HTTP API (vLLM's --port)")(
      "no-http", po::bool_switch(&no_http), "no HTTP API, ZeroMQ only")(
      "api-key", po::value(&key_sources.option),
      "HTTP clients must send `Authorization: Bearer KEY` on /v1/ routes (visible in `ps`: "
      "prefer --api-key-file or the QMPI_API_KEY environment variable)")(
      "api-key-file", po::value(&key_sources.file),
      "read the API key from this file (its first line; keep the file private)")(
      "max-queue", po::value(&max_queue)->default_value(256),
      "requests waiting to start beyond which new ones get a `busy` error")(
      "max-request-bytes", po::value(&max_request)->default_value("1MiB"),
      "largest ZeroMQ message and HTTP body accepted (a size: 65536, 512KiB, 2MiB)")(
      "client-buffer-bytes", po::value(&client_buffer)->default_value("4MiB"),
      "replies held for one client that does not read before it is dropped (a size)")(
      "zmq-sndhwm", po::value(&zmq.send_hwm)->default_value(1000),
      "messages ZeroMQ queues per client before --client-buffer-bytes starts to count")(
      "http-header-timeout", po::value(&header_s)->default_value(http_s(http.timeouts.header)),
      "seconds a request's head may take (from the connect, or from its first byte on a "
      "kept-alive connection); slower clients are disconnected")(
      "http-body-timeout", po::value(&body_s)->default_value(http_s(http.timeouts.body)),
      "seconds a request's body may take after its head")(
      "http-threads", po::value(&http.threads)->default_value(2),
      "I/O threads of the HTTP front, and as many that check and tokenize request bodies; "
      "connections are not limited by it (each costs a few KiB, not a thread)")(
      "served-model-name", po::value(&served_names)->multitoken(),
      "names requests may give as \"model\" (the first is the one /v1/models and responses "
      "show); a request naming another model gets 404 model_not_found (default: the model "
      "folder's name, and --model as written)");
  bool no_stats = false;
  s.add_options()("disable-log-stats", po::bool_switch(&no_stats),
                  "no stats line every 10 s (throughput, requests running and waiting, KV usage)")(
      "enable-log-requests", po::bool_switch(&loop_opts.log_requests),
      "log a line per request received (its prompt, cut to --max-log-len) and one as it ends")(
      "max-log-len", po::value(&loop_opts.max_log_len)->default_value(loop_opts.max_log_len),
      "characters of a prompt --enable-log-requests shows");
  std::string reasoning_parser;
  add_reasoning_parser_option(s, reasoning_parser);
  desc.add(s);
  desc.add(scheduler_options(config));
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi serve --model DIR [--host 127.0.0.1 --port 8000] "
                     "[--zmq tcp://127.0.0.1:5555] [options]"))
    return 0;
  const bool reasoning = reasoning_parser_on(reasoning_parser);
  http.listen = http_listen_address(http.listen, http_host, http_port, no_http, vm);
  zmq.max_message_bytes = size_t(parse_byte_size(max_request, "--max-request-bytes"));
  zmq.client_buffer_bytes = size_t(parse_byte_size(client_buffer, "--client-buffer-bytes"));
  if (max_queue < 1) raise(Err::Usage, "--max-queue must be at least 1");
  if (zmq.max_message_bytes < 1024) raise(Err::Usage, "--max-request-bytes must be at least 1024");
  if (http.threads < 1) raise(Err::Usage, "--http-threads must be at least 1");
  if (!(header_s > 0 && body_s > 0 && header_s <= 3600 && body_s <= 3600))
    raise(Err::Usage, "--http-header-timeout and --http-body-timeout must be in (0, 3600] s");
  http.timeouts.header = std::chrono::milliseconds(int64_t(header_s * 1000));
  http.timeouts.body = std::chrono::milliseconds(int64_t(body_s * 1000));
  loop_opts.default_max_tokens = config.default_max_tokens;
  if (!no_stats) loop_opts.stats_interval = stats_interval();
  loop_opts.stop_here = [] { return stop_requested(); };
  loop_opts.cut_short = []() -> std::optional<Error> {
    if (!stop_ends_job()) return std::nullopt;
    return Error(Err::Interrupted,
                 "the launcher (Open MPI) is ending the job, as it does when a rank died or it was "
                 "interrupted itself, and kills every rank a second later: no time to finish "
                 "this request",
                 "Send the request again once the job is back; mpirun's own lines say why it "
                 "ended the job.");
  };
  const std::string model_arg = config.model.files();
  std::vector<std::string> accepted = served_names;
  if (served_names.empty()) {
    accepted = {model_name(model_arg)};
    if (model_arg != accepted[0]) accepted.push_back(model_arg);  // vLLM's default name
  }
  loop_opts.model_name = accepted[0];
  key_sources.env = std::getenv("QMPI_API_KEY");
  http.api_key = resolve_api_key(key_sources);
  zmq.api_key = http.api_key;  // one key for both fronts: neither is a way around the other
  http.model_name = loop_opts.model_name;
  http.model_root = model_arg;
  http.listed_models = served_names.empty() ? std::vector<std::string>{accepted[0]} : served_names;
  http.max_body_bytes = zmq.max_message_bytes;
  http.client_buffer_bytes = zmq.client_buffer_bytes;

  // Every rank: the first SIGTERM/SIGINT drains (all ranks agree through the stop poll).
  SignalGuard signals("rank " + std::to_string(launcher_rank()));
  std::unique_ptr<FrontFiles> files;
  std::unique_ptr<RequestHub> hub;
  std::unique_ptr<ServeMetrics> metrics;
  std::unique_ptr<ZmqBroker> broker;
  std::unique_ptr<HttpGateway> gateway;
  if (launcher_rank() == 0) {  // the fronts start before MPI, on rank 0 only
    ignore_sigpipe();
    files = std::make_unique<FrontFiles>(load_front_files(config.model));
    files->model.reasoning_parser = reasoning;
    files->model.served_names = accepted;
    hub = std::make_unique<RequestHub>(max_queue);
    metrics = std::make_unique<ServeMetrics>(loop_opts.model_name);
    broker = std::make_unique<ZmqBroker>(zmq, files->model, *hub, *metrics);
    spdlog::info("zmq: listening on {}", broker->endpoint());
    if (!http.listen.empty()) {
      gateway = std::make_unique<HttpGateway>(http, files->model, *hub, *metrics);
      spdlog::info("http: listening on {}:{}", gateway->host(), gateway->port());
      if (http.api_key.empty())
        spdlog::warn(
            "http: no API key: anyone who can reach {}:{} may use the server (give "
            "--api-key-file or QMPI_API_KEY)",
            gateway->host(), gateway->port());
    }
  }
  const auto stop_fronts = [&](std::chrono::milliseconds flush) {
    if (gateway) gateway->stop(flush);
    if (broker) broker->stop(flush);
  };
  // A rank that stops answering ends the job through the comm watchdog (MPI_Abort); before that,
  // rank 0 tells every request in flight why.
  struct AbortHook {
    ~AbortHook() { set_abort_hook(nullptr); }
  } clear_hook_on_return;
  if (hub)
    set_abort_hook([&](const Error& e) {
      hub->fail_all(e);
      if (broker) broker->stop(std::chrono::milliseconds(500));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // HTTP handlers write theirs
    });

  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) {
    try {
      if (!hub)
        raise(Err::Internal, "MPI rank 0 is not the launcher's rank 0; the fronts are not open");
      engine.executor().set_valid_vocab(files->tokenizer->vocab_size());
      const ModelFacts model = ModelFacts::from(engine, files->model);
      // One scheduler per data-parallel replica (one with --dp 1); an idle replica hears from
      // rank 0 well within --comm-timeout.
      ReplicaScheduler sched(engine.replica_runners(), engine.replica_blocks(),
                             engine.scheduler_config(), config.parallel.comm_timeout_s / 4);
      ServeLoop loop(loop_opts, model, sched, *hub, *metrics, &engine.executor().times());
      loop.run([&] { return engine.executor().poll_stop(); });
      sched.log_summary();
      stop_fronts(kFlushOnExit);
      spdlog::info("served {} requests; stopped cleanly", metrics->counters().ok);
      return replica_loss_exit_code(sched);
    } catch (const Error& e) {
      // The requests in flight got the error; give the fronts a moment to send it.
      stop_fronts(std::chrono::milliseconds(500));
      std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
      return e.exit_code();
    }
  });
}

}  // namespace qmpi
