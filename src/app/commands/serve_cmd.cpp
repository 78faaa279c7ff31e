// qmpi serve: an online server over the whole mesh (docs/user-guide.md, docs/protocol.md). Rank
// 0 opens the ZeroMQ broker (and the HTTP front) before the engine is built, so clients can ask
// for health while the ranks load; then its MPI thread runs the serving loop and the other ranks
// serve its steps. SIGTERM drains: the requests in flight finish, then every rank exits 0. A
// SIGTERM from Open MPI's launcher (ending the job: a rank died, or mpirun was interrupted)
// leaves a second before its SIGKILL, so the requests in flight get an error at once instead.
// The server itself (hub, metrics, fronts) is src/serve/server.h; this file turns the command
// line into its options.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/commands/lora_options.h"
#include "app/commands/options.h"
#include "core/byte_size.h"
#include "io/gguf_file.h"
#include "io/h5_checkpoint.h"
#include "parallel/launcher.h"
#include "parallel/signals.h"
#include "serve/api_key.h"
#include "serve/server.h"

namespace qmpi {
namespace {

// What the options give before they become ServerOptions.
struct ServeCli {
  ServerOptions server;
  ApiKeySources key_sources;
  std::string http_host;
  int http_port = 8000;
  bool no_http = false;
  std::string max_request, client_buffer, reasoning_parser;
  std::vector<std::string> served_names;
  double header_s = 0, body_s = 0;  // --http-header-timeout, --http-body-timeout
  bool no_stats = false;            // --disable-log-stats
};

std::string model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  return is_h5_path(p.string()) || is_gguf_path(p.string()) ? p.stem().string()
                                                            : p.filename().string();
}

po::options_description serve_options(ServeCli& c) {
  ServerOptions& o = c.server;
  const auto http_s = [](std::chrono::milliseconds t) { return double(t.count()) / 1000; };
  po::options_description s("serve");
  s.add_options()(
      "zmq", po::value(&o.zmq.endpoint)->default_value("tcp://127.0.0.1:5555"),
      "ZeroMQ ROUTER endpoint of the request broker (tcp://HOST:PORT; port * picks a free one; "
      "tcp://0.0.0.0:5555 for every interface). ZeroMQ clients are not authenticated: keep it "
      "on a trusted network")(
      "http", po::value(&o.http.listen),
      "serve the OpenAI-compatible HTTP API on HOST:PORT (port 0 picks a free one); default: "
      "--host:--port")(
      "host", po::value(&c.http_host)->default_value("127.0.0.1"),
      "address of the HTTP API (vLLM's --host); 0.0.0.0 listens on every interface")(
      "port", po::value(&c.http_port)->default_value(8000), "port of the HTTP API (vLLM's --port)")(
      "no-http", po::bool_switch(&c.no_http), "no HTTP API, ZeroMQ only")(
      "api-key", po::value(&c.key_sources.option),
      "HTTP clients must send `Authorization: Bearer KEY` on /v1/ routes (visible in `ps`: "
      "prefer --api-key-file or the QMPI_API_KEY environment variable)")(
      "api-key-file", po::value(&c.key_sources.file),
      "read the API key from this file (its first line; keep the file private)")(
      "max-queue", po::value(&o.max_queue)->default_value(256),
      "requests waiting to start beyond which new ones get a `busy` error")(
      "max-request-bytes", po::value(&c.max_request)->default_value("1MiB"),
      "largest ZeroMQ message and HTTP body accepted (a size: 65536, 512KiB, 2MiB)")(
      "client-buffer-bytes", po::value(&c.client_buffer)->default_value("4MiB"),
      "replies held for one client that does not read before it is dropped (a size)")(
      "zmq-sndhwm", po::value(&o.zmq.send_hwm)->default_value(1000),
      "messages ZeroMQ queues per client before --client-buffer-bytes starts to count")(
      "http-header-timeout", po::value(&c.header_s)->default_value(http_s(o.http.timeouts.header)),
      "seconds a request's head may take (from the connect, or from its first byte on a "
      "kept-alive connection); slower clients are disconnected")(
      "http-body-timeout", po::value(&c.body_s)->default_value(http_s(o.http.timeouts.body)),
      "seconds a request's body may take after its head")(
      "http-threads", po::value(&o.http.threads)->default_value(2),
      "I/O threads of the HTTP front, and as many that check and tokenize request bodies; "
      "connections are not limited by it (each costs a few KiB, not a thread)")(
      "served-model-name", po::value(&c.served_names)->multitoken(),
      "names requests may give as \"model\" (the first is the one /v1/models and responses "
      "show); a request naming another model gets 404 model_not_found (default: the model "
      "folder's name, and --model as written)");
  s.add_options()("disable-log-stats", po::bool_switch(&c.no_stats),
                  "no stats line every 10 s (throughput, requests running and waiting, KV usage)")(
      "enable-log-requests", po::bool_switch(&o.loop.log_requests),
      "log a line per request received (its prompt, cut to --max-log-len) and one as it ends")(
      "max-log-len", po::value(&o.loop.max_log_len)->default_value(o.loop.max_log_len),
      "characters of a prompt --enable-log-requests shows");
  add_reasoning_parser_option(s, c.reasoning_parser);
  return s;
}

// --http HOST:PORT, else --host and --port (vLLM's), unless --no-http; "" when off.
std::string http_listen_address(const ServeCli& c, const po::variables_map& vm) {
  const bool host_port = !vm["host"].defaulted() || !vm["port"].defaulted();
  const std::string& http = c.server.http.listen;
  if (c.no_http && (!http.empty() || host_port))
    raise(Err::Usage,
          "--no-http turns the HTTP API off; it cannot go with --http, --host or --port");
  if (!http.empty() && host_port)
    raise(Err::Usage, "give --http HOST:PORT or --host/--port, not both");
  if (c.no_http) return {};
  if (!http.empty()) return http;
  if (c.http_port < 0 || c.http_port > 65535) raise(Err::Usage, "--port must be in [0, 65535]");
  const bool v6 = c.http_host.find(':') != std::string::npos;
  return (v6 ? "[" + c.http_host + "]" : c.http_host) + ":" + std::to_string(c.http_port);
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

// The launcher is ending the job: no time to drain.
std::optional<Error> job_ending() {
  if (!stop_ends_job()) return std::nullopt;
  return Error(Err::Interrupted,
               "the launcher (Open MPI) is ending the job, as it does when a rank died or it was "
               "interrupted itself, and kills every rank a second later: no time to finish "
               "this request",
               "Send the request again once the job is back; mpirun's own lines say why it "
               "ended the job.");
}

// The options checked and completed: limits, the names the model answers to, the API key.
ServerOptions server_options(ServeCli& c, const po::variables_map& vm, const EngineConfig& config) {
  ServerOptions& o = c.server;
  o.reasoning_parser = reasoning_parser_on(c.reasoning_parser);
  o.http.listen = http_listen_address(c, vm);
  o.zmq.max_message_bytes = size_t(parse_byte_size(c.max_request, "--max-request-bytes"));
  o.zmq.client_buffer_bytes = size_t(parse_byte_size(c.client_buffer, "--client-buffer-bytes"));
  if (o.max_queue < 1) raise(Err::Usage, "--max-queue must be at least 1");
  if (o.zmq.max_message_bytes < 1024)
    raise(Err::Usage, "--max-request-bytes must be at least 1024");
  if (o.http.threads < 1) raise(Err::Usage, "--http-threads must be at least 1");
  if (!(c.header_s > 0 && c.body_s > 0 && c.header_s <= 3600 && c.body_s <= 3600))
    raise(Err::Usage, "--http-header-timeout and --http-body-timeout must be in (0, 3600] s");
  o.http.timeouts.header = std::chrono::milliseconds(int64_t(c.header_s * 1000));
  o.http.timeouts.body = std::chrono::milliseconds(int64_t(c.body_s * 1000));
  o.loop.default_max_tokens = config.default_max_tokens;
  if (!c.no_stats) o.loop.stats_interval = stats_interval();
  o.loop.stop_here = [] { return stop_requested(); };
  o.loop.cut_short = job_ending;
  const std::string model_arg = config.model.files();
  o.served_names = c.served_names;
  if (c.served_names.empty()) {
    o.served_names = {model_name(model_arg)};
    if (model_arg != o.served_names[0]) o.served_names.push_back(model_arg);  // vLLM's default
  }
  o.loop.model_name = o.served_names[0];
  c.key_sources.env = std::getenv("QMPI_API_KEY");
  o.http.api_key = resolve_api_key(c.key_sources);
  o.zmq.api_key = o.http.api_key;  // one key for both fronts: neither is a way around the other
  o.http.model_name = o.loop.model_name;
  o.http.model_root = model_arg;
  o.http.listed_models = c.served_names.empty() ? std::vector{o.served_names[0]} : c.served_names;
  finish_lora_options(config.lora, o.served_names);
  o.adapter_names = lora_names(config.lora);
  for (const LoraModule& m : config.lora.modules) o.http.adapter_roots.push_back(m.path);
  o.http.max_body_bytes = o.zmq.max_message_bytes;
  o.http.client_buffer_bytes = o.zmq.client_buffer_bytes;
  return o;
}

}  // namespace

int cmd_serve(const Args& args) {
  EngineConfig config = engine_config_for(Command::Serve);
  ServeCli cli;
  po::options_description desc = engine_options(config);
  desc.add(serve_options(cli));
  desc.add(scheduler_options(config));
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi serve --model DIR [--host 127.0.0.1 --port 8000] "
                     "[--zmq tcp://127.0.0.1:5555] [options]"))
    return 0;
  Server server(server_options(cli, vm, config));

  // Every rank: the first SIGTERM/SIGINT drains (all ranks agree through the stop poll).
  SignalGuard signals("rank " + std::to_string(launcher_rank()));
  if (launcher_rank() == 0) server.start(config.model);  // before MPI, on rank 0 only
  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) { return server.run(engine); });
}

}  // namespace qmpi
