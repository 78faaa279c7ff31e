#include "batch/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <spdlog/fmt/fmt.h>

namespace qmpi {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  const auto t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string rates(const ProgressRates& r) {
  return fmt::format("{:.1f} tok/s in, {:.1f} tok/s out", r.prompt_tok_s, r.output_tok_s);
}

// The ETA from each running request's progress against its max_tokens and the mean output.
ProgressRates with_running_eta(const ProgressCounts& c, ProgressRates r) {
  const int64_t done = c.ok + c.failed;
  const bool mean_known = done > 0 && c.generated_tokens > 0;
  const double mean = mean_known ? double(c.generated_tokens) / double(done) : 0.0;
  double left = 0;
  int64_t past_mean = 0;
  for (const ProgressCounts::Running& run : c.running_requests) {
    const double g = double(run.generated);
    if (run.cap >= 0)
      left += (mean_known ? std::clamp(mean, g, double(std::max(run.cap, run.generated)))
                          : double(run.cap)) -
              g;
    else if (mean_known && g < mean)
      left += mean - g;
    else
      ++past_mean;
  }
  const int64_t unstarted =
      std::max<int64_t>(c.total - c.skipped - done - int64_t(c.running_requests.size()), 0);
  if (unstarted > 0 && !mean_known) {
    r.unknown_why = "no request has finished yet";
  } else if (past_mean > 0) {
    r.unknown_why = fmt::format(
        "{} running request{} without max_tokens {} made more than the mean {:.0f} tokens",
        past_mean, past_mean == 1 ? "" : "s", past_mean == 1 ? "has" : "have", mean);
    if (!mean_known) r.unknown_why = fmt::format("{} running without max_tokens", past_mean);
  } else if (r.output_tok_s > 0) {
    r.eta_s = (left + double(unstarted) * mean) / r.output_tok_s;
  }
  return r;
}

}  // namespace

ProgressRates progress_rates(const ProgressCounts& c, double elapsed_s) {
  ProgressRates r;
  const double t = std::max(elapsed_s, 1e-9);
  const double generated = double(c.generated_tokens + c.running_generated_tokens);
  r.prompt_tok_s = double(c.prompt_tokens) / t;
  r.output_tok_s = generated / t;
  const int64_t done = c.ok + c.failed;
  const int64_t todo = c.total - c.skipped;
  if (done >= todo) return {r.prompt_tok_s, r.output_tok_s, 0.0, ""};
  if (!c.running_requests.empty()) return with_running_eta(c, r);
  if (done == 0 || c.generated_tokens == 0 || r.output_tok_s <= 0) return r;
  const double expected = double(c.generated_tokens) / double(done) * double(todo);
  r.eta_s = std::max(expected - generated, 0.0) / r.output_tok_s;
  return r;
}

Progress::Progress(bool tty, double interval_s, std::function<double()> clock)
    : clock_(clock ? std::move(clock) : std::function<double()>(now_s)),
      tty_(tty),
      interval_s_(tty ? 0.2 : interval_s),
      start_s_(clock_()) {}

double Progress::elapsed_s() const {
  return clock_() - start_s_;
}

void Progress::update(const ProgressCounts& c, bool force) {
  const double now = clock_();
  if (!force && now - last_s_ < interval_s_) return;
  last_s_ = now;
  const int64_t done = c.ok + c.failed;
  const int64_t todo = c.total - c.skipped;
  const double t = elapsed_s();
  const ProgressRates r = progress_rates(c, t);
  const double eta = r.eta_s;
  const double pct = todo > 0 ? 100.0 * double(done) / double(todo) : 100.0;
  if (tty_) {
    const int width = 24;
    const int fill = int(pct / 100.0 * width);
    std::fprintf(stderr, "\r[%s%s] %lld/%lld %s, ETA %s, KV %lld/%lld  ",
                 std::string(size_t(fill), '#').c_str(),
                 std::string(size_t(width - fill), '.').c_str(), (long long)done, (long long)todo,
                 rates(r).c_str(), duration(eta).c_str(), (long long)c.kv_blocks_used,
                 (long long)c.kv_blocks);
    drew_bar_ = true;
  } else {
    std::fprintf(
        stderr,
        "batch: %lld/%lld done (%.0f%%, %lld failed), %lld running, %lld waiting, %s, "
        "KV %lld/%lld blocks, %s elapsed, ETA %s\n",
        (long long)done, (long long)todo, pct, (long long)c.failed, (long long)c.running,
        (long long)c.waiting, rates(r).c_str(), (long long)c.kv_blocks_used, (long long)c.kv_blocks,
        duration(t).c_str(),
        r.unknown_why.empty() ? duration(eta).c_str() : ("unknown: " + r.unknown_why).c_str());
  }
  std::fflush(stderr);
}

void Progress::summary(const ProgressCounts& c, int64_t peak_kv_blocks, const std::string& extra) {
  if (drew_bar_) std::fprintf(stderr, "\n");
  const double t = std::max(elapsed_s(), 1e-9);
  std::fprintf(
      stderr,
      "batch: %lld ok, %lld failed, %lld skipped (done before) | prompt %lld tokens, "
      "generated %lld tokens | wall %.1f s | %s, %.2f req/s | peak KV %lld/%lld blocks "
      "(%.0f%%)%s\n",
      (long long)c.ok, (long long)c.failed, (long long)c.skipped, (long long)c.prompt_tokens,
      (long long)c.generated_tokens, t, rates(progress_rates(c, t)).c_str(),
      double(c.ok + c.failed) / t, (long long)peak_kv_blocks, (long long)c.kv_blocks,
      c.kv_blocks > 0 ? 100.0 * double(peak_kv_blocks) / double(c.kv_blocks) : 0.0, extra.c_str());
  std::fflush(stderr);
}

}  // namespace qmpi
