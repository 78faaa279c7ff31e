#include "serve/stats_line.h"

#include <fmt/format.h>

namespace qmpi {

std::string StatsLine::due(Clock::time_point now, const MetricCounters& c, const EngineSnapshot& s,
                           int64_t queued) {
  if (interval_.count() <= 0) return {};
  if (last_ == Clock::time_point{}) {  // the first call starts the clock
    last_ = now;
    prompt_ = c.prompt_tokens;
    generated_ = c.generation_tokens;
    return {};
  }
  if (now - last_ < interval_) return {};
  const double dt = std::chrono::duration<double>(now - last_).count();
  const int64_t waiting = s.waiting + queued;
  const bool idle = c.prompt_tokens == prompt_ && c.generation_tokens == generated_ &&
                    s.running == 0 && waiting == 0;
  std::string line;
  if (!(idle && was_idle_)) {
    const double kv =
        s.kv_blocks_total > 0 ? 100.0 * double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0;
    line = fmt::format(
        "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
        "Running: {} reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Preemptions: {}",
        double(c.prompt_tokens - prompt_) / dt, double(c.generation_tokens - generated_) / dt,
        s.running, waiting, kv, s.preemptions);
  }
  was_idle_ = idle;
  last_ = now;
  prompt_ = c.prompt_tokens;
  generated_ = c.generation_tokens;
  return line;
}

}  // namespace qmpi
