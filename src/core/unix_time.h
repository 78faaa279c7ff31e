// Seconds since the Unix epoch: the `created` field of OpenAI objects and batch timestamps.
#pragma once
#include <chrono>
#include <cstdint>

namespace qmpi {

inline int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace qmpi
