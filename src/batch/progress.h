// Progress of a batch job on stderr: a bar redrawn in place on a terminal, otherwise one line
// every few seconds (logs and Slurm output files), and a summary at the end.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qmpi {

struct ProgressCounts {
  int64_t total = 0;    // requests in the input (lines less blank ones)
  int64_t skipped = 0;  // already done by an earlier run (--resume)
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;          // by the requests that finished (ok or failed)
  int64_t running_generated_tokens = 0;  // so far by the requests still running
  int64_t running = 0;                   // sequences
  int64_t waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks = 0;
  // Per running request: tokens made so far and the most it may make (n x max_tokens; -1 when
  // the request set no max_tokens). Empty: the ETA comes from the finished requests alone.
  struct Running {
    int64_t generated = 0;
    int64_t cap = -1;
  };
  std::vector<Running> running_requests;
};

// What the progress lines show at `elapsed_s` seconds into the job.
struct ProgressRates {
  double prompt_tok_s = 0;  // prompts of finished requests
  double output_tok_s = 0;  // every generated token, running requests' too
  // Seconds left, from the output token rate and the output of the requests finished so far
  // (their mean times the requests left, less what the running ones have made): requests
  // finish in waves under continuous batching, so a rate of finished requests misleads until
  // late in the job. With running_requests, each running request is expected to make the mean
  // output of the finished ones, clamped to what it has made and its max_tokens; one without
  // max_tokens that is past the mean makes the ETA unknown. Negative when unknown, and then
  // `unknown_why` says why.
  double eta_s = -1;
  std::string unknown_why;
};
ProgressRates progress_rates(const ProgressCounts& c, double elapsed_s);

class Progress {
 public:
  // `clock` gives seconds from any fixed origin (tests pass a fake one).
  Progress(bool tty, double interval_s, std::function<double()> clock = {});
  // Prints when the interval has passed (or always with `force`).
  void update(const ProgressCounts& c, bool force = false);
  // Ends the bar and prints the summary; `extra` is appended to it.
  void summary(const ProgressCounts& c, int64_t peak_kv_blocks, const std::string& extra);
  double elapsed_s() const;

 private:
  std::function<double()> clock_;
  bool tty_;
  double interval_s_;
  double start_s_;
  double last_s_ = -1e9;
  bool drew_bar_ = false;
};

}  // namespace qmpi
