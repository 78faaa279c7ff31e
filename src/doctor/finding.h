// One result of `qmpi doctor`: OK, WARN or FAIL, in a section (mpi, cuda, host, model, comm),
// with the catalogue code and fix when it is not OK. Findings travel between ranks as JSON and
// are merged on rank 0, where identical findings of several ranks or hosts become one line.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi::doctor {

enum class Status { Ok, Warn, Fail };
const char* status_name(Status s);  // "OK", "WARN", "FAIL"

struct Finding {
  std::string section;
  Status status = Status::Ok;
  std::optional<Err> code;  // set for WARN and FAIL
  std::string message;      // one sentence with the numbers and the file / device / rank
  std::string fix;          // the specific fix; the catalogue's when none is known
  std::string where;        // "host vm", "rank 3", or "" for the whole job
};

Finding ok(std::string section, std::string message);
Finding warn(std::string section, Err code, std::string message, std::string fix = {});
Finding fail(std::string section, Err code, std::string message, std::string fix = {});
// A caught catalogue error as a FAIL (its code, sentence and fix).
Finding fail(std::string section, const Error& e);

nlohmann::json to_json(const Finding& f);
Finding finding_from_json(const nlohmann::json& j);

// The section order of every report.
const std::vector<std::string>& section_order();

// Merges findings that differ only in `where` (in first-seen order, their places joined) and
// orders them by section, keeping the order within a section.
std::vector<Finding> merge_findings(const std::vector<Finding>& all);

// 0 when nothing FAILs, else the exit code of the first FAIL in section order.
int exit_code_of(const std::vector<Finding>& merged);

}  // namespace qmpi::doctor
