// qmpi serve's server on rank 0: the request hub, the metrics and the fronts (the ZeroMQ broker,
// the HTTP gateway) around the serving loop. start() opens the fronts before MPI and the engine
// exist, so clients can ask for health while the ranks load; run() serves on the engine until a
// drain (SIGTERM) or an error, then stop() closes the fronts. If the job is aborted (a rank stops
// answering: the comm watchdog), every request in flight gets the error and the fronts get a
// moment to send it, on the aborting thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_config.h"
#include "requests/sequence_spec.h"
#include "serve/http_options.h"
#include "serve/serve_loop.h"
#include "serve/zmq_broker.h"

namespace qmpi {

class HttpGateway;
class RequestHub;
class ServeMetrics;

struct ServerOptions {
  ServeLoopOptions loop;
  BrokerOptions zmq;
  HttpOptions http;  // http.listen empty: no HTTP front
  int64_t max_queue = 256;
  bool reasoning_parser = false;
  std::vector<std::string> served_names;  // names a request's "model" may give
  // And the LoRA adapters' names, in --lora-modules order.
  std::vector<std::string> adapter_names;
};

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads the tokenizer and chat template of `model`, opens the fronts and sets the abort hook.
  void start(const ModelSource& model);
  // Serves on `engine` (rank 0) until a drain ends the loop; stops the fronts. Returns the exit
  // code: 0, or QM414's when replicas were lost on the way. An error is printed and its exit
  // code returned once the requests in flight got it.
  int run(Engine& engine);
  // Closes the fronts, giving responses under way up to `flush` to finish.
  void stop(std::chrono::milliseconds flush);

 private:
  struct Fronts;

  ServerOptions opts_;
  std::unique_ptr<Fronts> fronts_;
};

}  // namespace qmpi
