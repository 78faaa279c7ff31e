// What `qmpi doctor` prints: findings by section (OK / WARN / FAIL with the catalogue's code and
// fix), the self-test table, and a summary line; or the same as one JSON document.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor/comm_selftest.h"
#include "doctor/finding.h"
#include "model/shard_plan.h"

namespace qmpi::doctor {

struct DoctorReport {
  int ranks = 1;
  int hosts = 1;
  Layout layout;
  std::string backend;            // "cpu" or "cuda": what the checks assumed
  std::vector<Finding> findings;  // merged, in section order
  std::vector<CommMeasurement> comm;
  int exit_code = 0;
};

std::string render_text(const DoctorReport& report);
nlohmann::json render_json(const DoctorReport& report);

}  // namespace qmpi::doctor
