// The server's periodic stats line, as vLLM logs it (unless --disable-log-stats): prompt and
// generation throughput since the last line, requests running and waiting, KV cache usage.
// Quiet while idle: one line after the work ends, then none until there is work again.
#pragma once
#include <chrono>
#include <string>

#include "serve/metrics.h"
#include "serve/request_hub.h"

namespace qmpi {

class StatsLine {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StatsLine(std::chrono::milliseconds interval) : interval_(interval) {}

  // The line due at `now`, or "" (not yet due, idle, or interval 0).
  std::string due(Clock::time_point now, const MetricCounters& c, const EngineSnapshot& s,
                  int64_t queued);

 private:
  std::chrono::milliseconds interval_;
  Clock::time_point last_{};
  int64_t prompt_ = 0, generated_ = 0;
  bool was_idle_ = true;
};

}  // namespace qmpi
