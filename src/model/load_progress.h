// Weight loading's progress per rank, at debug level (loads of large checkpoints take minutes):
// after each decoder layer at most every few seconds, the bytes this rank holds, the read rate
// and the time left at the mean time per layer so far.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace qmpi {

class LoadProgress {
 public:
  using Clock = std::chrono::steady_clock;
  // `who`: "stage 1 tp 0"; `layers`: the decoder layers this rank loads.
  LoadProgress(std::string who, int64_t layers, std::chrono::milliseconds every);
  // Layer `done` (1-based) of this rank's is loaded, `bytes` held in all.
  void layer_done(int64_t done, uint64_t bytes, Clock::time_point now = Clock::now());
  // The line layer_done() logs (tests).
  std::string line(int64_t done, uint64_t bytes, Clock::time_point now) const;

 private:
  std::string who_;
  int64_t layers_;
  std::chrono::milliseconds every_;
  Clock::time_point start_, last_;
};

}  // namespace qmpi
