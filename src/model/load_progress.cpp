#include "model/load_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace qmpi {

LoadProgress::LoadProgress(std::string who, int64_t layers, std::chrono::milliseconds every)
    : who_(std::move(who)), layers_(layers), every_(every), start_(Clock::now()), last_(start_) {}

std::string LoadProgress::line(int64_t done, uint64_t bytes, Clock::time_point now) const {
  const double s = std::chrono::duration<double>(now - start_).count();
  const double rate = s > 0 ? double(bytes) / s : 0.0;
  const double left = done > 0 ? s / double(done) * double(layers_ - done) : 0.0;
  return fmt::format(
      "weights ({}): layer {}/{}, {:.2f} GiB in {:.1f} s ({:.0f} MB/s), ETA {:.0f} s", who_, done,
      layers_, double(bytes) / double(1ull << 30), s, rate / 1e6, left);
}

void LoadProgress::layer_done(int64_t done, uint64_t bytes, Clock::time_point now) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  if (now - last_ < every_ && done < layers_) return;
  last_ = now;
  spdlog::debug("{}", line(done, bytes, now));
}

}  // namespace qmpi
