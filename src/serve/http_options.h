// The HTTP front's settings: where it listens, its limits and its timeouts.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace qmpi {

// Against clients that hold a connection without finishing a request (slowloris) or without
// reading their response. Each bounds one phase of a connection.
struct HttpTimeouts {
  std::chrono::milliseconds idle{60'000};    // a kept-alive connection with no request begun
  std::chrono::milliseconds header{20'000};  // a request's first byte to the end of its header
  std::chrono::milliseconds body{60'000};    // the end of the header to the end of the body
  std::chrono::milliseconds write{30'000};   // one write of a response (a client not reading)
  // After a refused request whose body was not read: how long to read and drop what the client
  // still sends, so that it sees the answer instead of a reset.
  std::chrono::milliseconds linger{5'000};
};

struct HttpOptions {
  std::string listen;                            // --http, "HOST:PORT" (port 0 = any free port)
  std::string api_key;                           // empty: no authentication
  size_t max_body_bytes = size_t(1) << 20;       // larger bodies get 413 BodyTooLarge
  size_t max_header_bytes = size_t(16) << 10;    // request line and headers (431 past it)
  int threads = 2;                               // I/O threads, and as many preparing bodies
  size_t client_buffer_bytes = size_t(4) << 20;  // response text held for one slow reader
  std::string model_name;                        // responses' default "model"
  std::vector<std::string> listed_models;        // GET /v1/models (empty: model_name)
  std::string model_root;                        // GET /v1/models' "root": --model as given
  // --lora-modules' folders, in the order of ModelFacts::adapter_names: GET /v1/models lists
  // each adapter with this "root" and the base model as its "parent", as vLLM does.
  std::vector<std::string> adapter_roots;
  HttpTimeouts timeouts;
};

}  // namespace qmpi
