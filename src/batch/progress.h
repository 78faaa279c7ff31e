// Progress of a batch job on stderr: a bar redrawn in place on a terminal, otherwise one line
// every few seconds (logs and Slurm output files), and a summary at the end.
#pragma once
#include <cstdint>
#include <string>

namespace qmpi {

struct ProgressCounts {
  int64_t total = 0;    // requests in the input (lines less blank ones)
  int64_t skipped = 0;  // already done by an earlier run (--resume)
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t running = 0;  // sequences
  int64_t waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks = 0;
};

class Progress {
 public:
  Progress(bool tty, double interval_s);
  // Prints when the interval has passed (or always with `force`).
  void update(const ProgressCounts& c, bool force = false);
  // Ends the bar and prints the summary; `extra` is appended to it.
  void summary(const ProgressCounts& c, int64_t peak_kv_blocks, const std::string& extra);
  double elapsed_s() const;

 private:
  std::string rates(const ProgressCounts& c) const;

  bool tty_;
  double interval_s_;
  double start_s_;
  double last_s_ = -1e9;
  bool drew_bar_ = false;
};

}  // namespace qmpi
