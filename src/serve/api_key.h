// Where the server's API key (HTTP and ZeroMQ) comes from. On the command line (--api-key) it is
// visible to every user of the host in `ps`; --api-key-file and the QMPI_API_KEY environment
// variable keep it out of sight. One source at a time: --api-key or --api-key-file, else
// QMPI_API_KEY.
#pragma once
#include <string>
#include <string_view>

namespace qmpi {

struct ApiKeySources {
  std::string option;         // --api-key
  std::string file;           // --api-key-file
  const char* env = nullptr;  // getenv("QMPI_API_KEY")
};

// The key (empty: no authentication). Raises Usage for both options at once, an unreadable or
// empty file, or a key with whitespace or control characters inside it.
std::string resolve_api_key(const ApiKeySources& from);

// `given` equals `key`, compared in constant time (the key is a secret: how long a wrong guess
// takes must not say how much of it was right). Both fronts, HTTP and ZeroMQ, compare with this.
bool api_key_matches(std::string_view given, std::string_view key);

}  // namespace qmpi
