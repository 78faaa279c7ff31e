#include "requests/stop_strings.h"

#include <algorithm>

namespace qmpi {

StopStringMatcher::StopStringMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops,
                                     bool skip_special)
    : decoder_(tokenizer, skip_special) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStringMatcher::release(size_t n) {
  std::string out = held_.substr(0, n);
  held_.erase(0, n);
  text_ += out;
  return out;
}

// Releases the held text up to the first stop string, or all of it but the longest tail that
// could still grow into one.
std::string StopStringMatcher::scan() {
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = release(first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  return release(held_.size() - keep);
}

std::string StopStringMatcher::push(int32_t id) {
  if (stopped_) return {};
  held_ += decoder_.push(id);
  return scan();
}

std::string StopStringMatcher::finish() {
  if (stopped_) return {};
  held_ += decoder_.flush();
  std::string out = scan();
  if (!stopped_) out += release(held_.size());
  return out;
}

}  // namespace qmpi
