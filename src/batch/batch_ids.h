// One id per input line, never shared, the same in every run of the job (resume is keyed on it).
// A line answers under its own custom_id/id when that is usable; otherwise (unreadable, repeated,
// or in the reserved form) under line_id(N), "qmpi-line-N". User ids of the reserved form are
// refused except on line N itself, so a generated id can never equal another line's user id.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/errors.h"

namespace qmpi {

class BatchIds {
 public:
  // The id line `line_no` answers under, given the id its parse gave (its own, or line_id(N)
  // when it had none). When the line's own id cannot be used, `error` receives why.
  std::string assign(const std::string& parsed_id, int64_t line_no, std::optional<Error>& error);

 private:
  std::unordered_map<std::string, int64_t> seen_;  // id -> line, this input
};

}  // namespace qmpi
