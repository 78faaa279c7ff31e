// The arithmetic of the batch progress lines on a simulated job: a fake clock, and requests that
// run in waves as continuous batching runs them.
#include "batch/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace qmpi {
namespace {

// 64 requests of 100 output tokens, 16 at a time, each token 0.1375 s apart: a 55 s job of
// four waves. Counts at `t` seconds (the previous waves finished, the current one part-way).
constexpr int64_t kRequests = 64, kSlots = 16, kTokens = 100;
constexpr double kTokenS = 0.1375;
constexpr double kJobS = double(kRequests / kSlots * kTokens) * kTokenS;

ProgressCounts at(double t) {
  ProgressCounts c;
  c.total = kRequests;
  const auto steps = int64_t(t / kTokenS);
  const int64_t waves = std::min(steps / kTokens, kRequests / kSlots);
  c.ok = waves * kSlots;
  c.generated_tokens = c.ok * kTokens;
  c.prompt_tokens = c.ok * 10;
  if (c.ok < kRequests) {
    c.running = kSlots;
    c.running_generated_tokens = kSlots * (steps % kTokens);
  }
  return c;
}

TEST(BatchProgress, OutputRateCountsRunningRequests) {
  // In the first wave nothing has finished, yet 16 sequences produce 116 tokens a second.
  const ProgressRates r = progress_rates(at(10.0), 10.0);
  EXPECT_NEAR(r.output_tok_s, double(kSlots) / kTokenS, 2.0);
  EXPECT_LT(r.eta_s, 0);  // no request has finished: unknown
}

TEST(BatchProgress, EtaTracksTheJobThroughItsWaves) {
  for (double t : {14.0, 20.0, 27.0, 33.0, 41.0, 50.0}) {
    const ProgressRates r = progress_rates(at(t), t);
    EXPECT_NEAR(r.eta_s, kJobS - t, 1.5) << "at " << t << " s";
  }
  EXPECT_EQ(progress_rates(at(kJobS + 1), kJobS + 1).eta_s, 0.0);
}

TEST(BatchProgress, EtaCountsSkippedAndFailedRequests) {
  ProgressCounts c;
  c.total = 10;
  c.skipped = 4;  // done by an earlier run: 6 to do
  c.ok = 2;
  c.failed = 1;  // no tokens: the mean output per request is 200 / 3
  c.generated_tokens = 200;
  c.running_generated_tokens = 0;
  const ProgressRates r = progress_rates(c, 10.0);  // 20 tok/s
  EXPECT_NEAR(r.eta_s, (200.0 / 3 * 6 - 200) / 20.0, 1e-9);
}

TEST(BatchProgress, EtaCountsRunningRequestsUpToTheirMaxTokens) {
  ProgressCounts c;
  c.total = 5;
  c.ok = 2;
  c.generated_tokens = 200;  // a mean of 100 per request
  // One capped at 40 (20 to go), one at 500 that has made 30 (70 to the mean), one unstarted.
  c.running_requests = {{20, 40}, {30, 500}};
  c.running_generated_tokens = 50;
  const ProgressRates r = progress_rates(c, 10.0);  // 25 tok/s
  EXPECT_TRUE(r.unknown_why.empty()) << r.unknown_why;
  EXPECT_NEAR(r.eta_s, (20.0 + 70.0 + 100.0) / 25.0, 1e-9);
}

TEST(BatchProgress, EtaIsUnknownWhileAnUncappedRequestIsPastTheMean) {
  // The job of the issue: every other request done, one without max_tokens at 4,071 tokens.
  ProgressCounts c;
  c.total = 10;
  c.ok = 9;
  c.generated_tokens = 900;
  c.running_requests = {{4071, -1}};
  c.running_generated_tokens = 4071;
  const ProgressRates r = progress_rates(c, 100.0);
  EXPECT_LT(r.eta_s, 0);
  EXPECT_NE(r.unknown_why.find("1 running request without max_tokens has made more than the "
                               "mean 100 tokens"),
            std::string::npos)
      << r.unknown_why;
  c.running_requests = {{40, -1}};  // below the mean: expected to make the mean
  c.running_generated_tokens = 40;
  EXPECT_NEAR(progress_rates(c, 100.0).eta_s, 60.0 / (940.0 / 100.0), 1e-9);
}

TEST(BatchProgress, LinesUseTheClockTheyAreGiven) {
  double now = 100.0;
  Progress p(false, 5.0, [&] { return now; });
  now = 120.0;
  EXPECT_DOUBLE_EQ(p.elapsed_s(), 20.0);
  // Redirect stderr to see what update() prints, and that it waits for the interval.
  std::FILE* saved = stderr;
  char buf[4096] = {};
  stderr = fmemopen(buf, sizeof buf, "w");
  p.update(at(20.0));
  now = 121.0;
  p.update(at(21.0));  // within the 5 s interval: nothing
  std::fclose(stderr);
  stderr = saved;
  const std::string text(buf);
  EXPECT_NE(text.find("16/64 done (25%, 0 failed), 16 running"), std::string::npos) << text;
  EXPECT_NE(text.find("tok/s out"), std::string::npos) << text;
  EXPECT_NE(text.find("20s elapsed, ETA 35s"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;  // one line
}

}  // namespace
}  // namespace qmpi
