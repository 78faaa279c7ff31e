// The periodic stats line: due once per interval, rates over the interval, quiet while idle.
#include "serve/stats_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qmpi {
namespace {

using ::testing::HasSubstr;
using Clock = StatsLine::Clock;

TEST(StatsLine, RatesOverTheIntervalThenQuietWhileIdle) {
  StatsLine stats(std::chrono::seconds(10));
  const Clock::time_point t0 = Clock::now();
  MetricCounters c;
  EngineSnapshot s;
  s.kv_blocks_total = 200;
  EXPECT_EQ(stats.due(t0, c, s, 0), "") << "the first call starts the clock";
  c.prompt_tokens = 400;
  c.generation_tokens = 100;
  s.running = 4;
  s.waiting = 1;
  s.kv_blocks_used = 50;
  EXPECT_EQ(stats.due(t0 + std::chrono::seconds(5), c, s, 2), "") << "not yet due";
  const std::string line = stats.due(t0 + std::chrono::seconds(10), c, s, 2);
  EXPECT_EQ(line,
            "Avg prompt throughput: 40.0 tokens/s, Avg generation throughput: 10.0 tokens/s, "
            "Running: 4 reqs, Waiting: 3 reqs, KV cache usage: 25.0%, Preemptions: 0");
  // The work ends: one more line showing it, then none while nothing moves.
  s.running = s.waiting = 0;
  s.kv_blocks_used = 0;
  EXPECT_THAT(stats.due(t0 + std::chrono::seconds(20), c, s, 0),
              HasSubstr("Avg prompt throughput: 0.0 tokens/s"));
  EXPECT_EQ(stats.due(t0 + std::chrono::seconds(30), c, s, 0), "");
  EXPECT_EQ(stats.due(t0 + std::chrono::seconds(40), c, s, 0), "");
  c.generation_tokens += 30;  // work again
  EXPECT_THAT(stats.due(t0 + std::chrono::seconds(50), c, s, 0),
              HasSubstr("Avg generation throughput: 3.0 tokens/s"));
}

TEST(StatsLine, IntervalZeroIsOff) {
  StatsLine stats(std::chrono::milliseconds(0));
  MetricCounters c;
  c.generation_tokens = 5;
  EngineSnapshot s;
  s.running = 1;
  EXPECT_EQ(stats.due(Clock::now(), c, s, 0), "");
  EXPECT_EQ(stats.due(Clock::now() + std::chrono::hours(1), c, s, 0), "");
}

}  // namespace
}  // namespace qmpi
