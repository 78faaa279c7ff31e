// Where the HTTP front's API key comes from. On the command line (--api-key) it is visible to
// every user of the host in `ps`; --api-key-file and the QMPI_API_KEY environment variable keep
// it out of sight. One source at a time: --api-key or --api-key-file, else QMPI_API_KEY.
#pragma once
#include <string>

namespace qmpi {

struct ApiKeySources {
  std::string option;         // --api-key
  std::string file;           // --api-key-file
  const char* env = nullptr;  // getenv("QMPI_API_KEY")
};

// The key (empty: no authentication). Raises Usage for both options at once, an unreadable or
// empty file, or a key with whitespace or control characters inside it.
std::string resolve_api_key(const ApiKeySources& from);

}  // namespace qmpi
