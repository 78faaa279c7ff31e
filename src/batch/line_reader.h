// Lines of a batch input read with a size limit (--max-line-bytes): a line longer than the
// limit is read through to its end without being held, so one 1 GB line costs the limit in
// memory, not a gigabyte, and becomes one error record while the job goes on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>

namespace qmpi {

// --max-line-bytes' default: far above any prompt a model's context holds, far below memory.
constexpr size_t kDefaultMaxLineBytes = size_t(16) << 20;

struct BoundedLine {
  std::string text;    // the line without its '\n'; empty when it was too long
  uint64_t bytes = 0;  // the line's full length
  bool too_long = false;
  bool blank = true;  // only whitespace (or nothing)
};

// Reads the next line of `in` into `line`. False at the end of the input (no line read).
bool read_bounded_line(std::istream& in, size_t max_bytes, BoundedLine& line);

}  // namespace qmpi
