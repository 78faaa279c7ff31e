// qmpi client: one request to a running `qmpi serve` over ZeroMQ, for a person at a terminal.
// Streams the text to stdout as it comes (--stream), or prints it when done; --health and
// --stats print the server's replies. An error reply exits with its catalogue code's status.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "app/commands/options.h"
#include "core/errors.h"
#include "serve/api_key.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

struct ClientCli {
  std::string connect = "tcp://127.0.0.1:5555";
  std::string prompt;
  std::string system;
  bool chat = false, stream = false, health = false, stats = false, ignore_eos = false;
  bool json_out = false;
  int64_t max_tokens = 0;
  double temperature = -1.0;
  int64_t seed = -1;
  double timeout_s = 600.0;
  double connect_timeout_s = 5.0;
  ApiKeySources key_sources;  // the server's key, read as `qmpi serve` reads it
  std::string api_key;
};

// A reply {"type": "error", "code": "QM501", ...} as the Error it stands for.
[[noreturn]] void raise_reply(const json& j) {
  const std::string code = j.value("code", "");
  int number = 0;
  if (code.size() > 2 && code.rfind("QM", 0) == 0) number = std::atoi(code.c_str() + 2);
  Err err = Err::Internal;
  for (const auto& e : error_catalogue())
    if (int(e.code) == number) err = e.code;
  raise(err, "the server answered: " + j.value("message", std::string("(no message)")),
        j.value("fix", std::string()));
}

json request_of(const ClientCli& c) {
  json j = {{"v", 1}, {"type", "generate"}, {"id", "client-" + std::to_string(::getpid())}};
  if (c.chat) {
    json messages = json::array();
    if (!c.system.empty()) messages.push_back({{"role", "system"}, {"content", c.system}});
    messages.push_back({{"role", "user"}, {"content", c.prompt}});
    j["messages"] = messages;
  } else {
    j["prompt"] = c.prompt;
  }
  if (c.max_tokens > 0) j["max_tokens"] = c.max_tokens;
  if (c.temperature >= 0) j["temperature"] = c.temperature;
  if (c.seed >= 0) j["seed"] = c.seed;
  if (c.ignore_eos) j["ignore_eos"] = true;
  j["stream"] = c.stream;
  if (!c.api_key.empty()) j["api_key"] = c.api_key;
  return j;
}

po::options_description client_options(ClientCli& c) {
  po::options_description desc("client");
  desc.add_options()("connect", po::value(&c.connect)->default_value(c.connect),
                     "the server's --zmq endpoint")(
      "prompt", po::value(&c.prompt), "the prompt (a completion, or the user turn with --chat)")(
      "chat", po::bool_switch(&c.chat), "send the prompt as a chat message")(
      "system", po::value(&c.system), "system message for --chat")(
      "stream", po::bool_switch(&c.stream), "print the text as it is generated")(
      "max-tokens", po::value(&c.max_tokens)->default_value(0),
      "tokens to generate at most (0: the server's default)")(
      "temperature", po::value(&c.temperature), "0 for greedy (default: the model's setting)")(
      "seed", po::value(&c.seed), "sampling seed")("ignore-eos", po::bool_switch(&c.ignore_eos),
                                                   "keep generating past end-of-sequence")(
      "json", po::bool_switch(&c.json_out), "print the server's final message as JSON")(
      "health", po::bool_switch(&c.health), "print the server's health and exit")(
      "stats", po::bool_switch(&c.stats), "print the server's stats (JSON) and exit")(
      "timeout", decimal_value(&c.timeout_s, 600.0),
      "seconds to wait for each reply before giving up")(
      "connect-timeout", decimal_value(&c.connect_timeout_s, 5.0),
      "seconds to wait for the server to answer at all (a health probe sent first; the server "
      "answers it while it loads)")(
      "api-key", po::value(&c.key_sources.option),
      "the server's API key (visible in `ps`: prefer --api-key-file or QMPI_API_KEY)")(
      "api-key-file", po::value(&c.key_sources.file), "file holding the server's API key");
  return desc;
}

// The wait for a server at all: never longer than --timeout.
std::chrono::milliseconds connect_wait(const ClientCli& c) {
  return std::chrono::milliseconds(int64_t(std::min(c.connect_timeout_s, c.timeout_s) * 1000));
}

[[noreturn]] void no_server(const ClientCli& c) {
  raise(Err::NoReply,
        fmt::format("nothing answered at {} within {:g} s", c.connect,
                    std::min(c.connect_timeout_s, c.timeout_s)),
        "Check that `qmpi serve` runs and that --connect is its --zmq endpoint (default "
        "tcp://127.0.0.1:5555); a server that is there answers within --connect-timeout "
        "(default 5 s), even while it loads.");
}

// Connects `sock` to --connect. ZeroMQ connects lazily and never says that nothing listens: a
// health probe answered within --connect-timeout tells a server that is there (loading or not)
// from none. --health and --stats are such a probe themselves.
void connect_to_server(zmq::socket_t& sock, const ClientCli& c) {
  try {
    sock.connect(c.connect);
  } catch (const zmq::error_t& e) {
    raise(Err::Usage, "cannot connect to " + c.connect + ": " + e.what(),
          "Give the server's endpoint, e.g. --connect tcp://127.0.0.1:5555.");
  }
  if (c.health || c.stats) return;
  sock.send(zmq::buffer(json{{"v", 1}, {"type", "health"}, {"id", "qmpi-client-probe"}}.dump()),
            zmq::send_flags::none);
  zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, connect_wait(c)) == 0) no_server(c);
  zmq::message_t probe;
  (void)sock.recv(probe, zmq::recv_flags::none);
}

// Prints the replies to the request sent until its last one; returns the exit status.
int print_replies(zmq::socket_t& sock, const ClientCli& c) {
  const bool probe = c.health || c.stats;
  const auto wait =
      probe ? connect_wait(c) : std::chrono::milliseconds(int64_t(c.timeout_s * 1000));
  for (;;) {
    zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) {
      if (probe) no_server(c);
      raise(Err::NoReply, fmt::format("no reply from {} in {:g} s", c.connect, c.timeout_s));
    }
    zmq::message_t msg;
    (void)sock.recv(msg, zmq::recv_flags::none);
    const json j = json::parse(msg.to_string_view(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
      raise(Err::Internal, "the server sent a non-JSON reply");
    const std::string type = j.value("type", "");
    if (type == "error") raise_reply(j);
    if (type == "health" || type == "stats") {
      std::cout << (type == "health" ? j.value("status", "") : j.dump()) << std::endl;
      return 0;
    }
    if (type == "delta") {
      std::cout << j.value("text", "") << std::flush;
      continue;
    }
    if (type == "final") {
      if (c.json_out) {
        if (c.stream) std::cout << "\n";
        std::cout << j.dump() << std::endl;
      } else if (c.stream) {
        std::cout << std::endl;
      } else {
        std::cout << j["choices"][0].value("text", "") << std::endl;
      }
      return 0;
    }
  }
}

}  // namespace

int cmd_client(const Args& args) {
  ClientCli c;
  const po::options_description desc = client_options(c);
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi client --connect tcp://HOST:5555 --prompt TEXT [--chat] [--stream]"))
    return 0;
  if (!c.health && !c.stats && c.prompt.empty())
    raise(Err::Usage, "give --prompt TEXT (or --health / --stats)");
  if (c.timeout_s <= 0) raise(Err::Usage, "--timeout must be positive");
  if (c.connect_timeout_s <= 0) raise(Err::Usage, "--connect-timeout must be positive");
  c.key_sources.env = std::getenv("QMPI_API_KEY");
  c.api_key = resolve_api_key(c.key_sources);

  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 0);
  connect_to_server(sock, c);
  const json req = c.health  ? json{{"v", 1}, {"type", "health"}}
                   : c.stats ? json{{"v", 1}, {"type", "stats"}}
                             : request_of(c);
  sock.send(zmq::buffer(req.dump()), zmq::send_flags::none);
  return print_replies(sock, c);
}

}  // namespace qmpi
