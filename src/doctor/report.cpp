#include "doctor/report.h"

namespace qmpi::doctor {
namespace {

// Continuation lines of a multi-line message (the GPU link matrix) line up under its start.
std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

std::string render_text(const DoctorReport& r) {
  std::string out = "qmpi doctor " + std::string(QMPI_VERSION) + ": " + std::to_string(r.ranks) +
                    " rank(s) on " + std::to_string(r.hosts) + " host(s), checking " +
                    layout_flags(r.layout) + " on the " + r.backend + " backend\n";
  const std::string pad(8, ' ');
  int counts[3] = {0, 0, 0};
  std::string section;
  const Finding* prev = nullptr;
  for (const Finding& f : r.findings) {
    if (f.section != section) {
      section = f.section;
      out += "\n" + section + "\n";
    }
    ++counts[int(f.status)];
    std::string line = "  " + std::string(status_name(f.status));
    line.resize(8, ' ');
    if (f.code) line += error_id(*f.code) + " " + std::string(error_entry(*f.code).name) + ": ";
    line += indent(f.message, pad);
    // Host names only tell something on several hosts; ranks matter whenever a rank failed.
    const bool show_where =
        !f.where.empty() &&
        (r.hosts > 1 || (f.status != Status::Ok && f.where.rfind("rank", 0) == 0));
    if (show_where) line += " [" + f.where + "]";
    out += line + "\n";
    // A run of findings with one code and fix (capped shape mismatches) shows the fix once.
    const bool same_fix = prev && prev->code == f.code && prev->fix == f.fix;
    if (f.code && !same_fix) out += pad + "fix: " + f.fix + "\n";
    prev = &f;
    if (section == "comm" && &f == &r.findings.back() && !r.comm.empty())
      out += "\n" + comm_table(r.comm);
  }
  if (section != "comm" && !r.comm.empty()) out += "\ncomm\n" + comm_table(r.comm);
  out += "\nsummary: " + std::to_string(counts[0]) + " OK, " + std::to_string(counts[1]) +
         " WARN, " + std::to_string(counts[2]) + " FAIL";
  for (const Finding& f : r.findings)
    if (f.status == Status::Fail) {
      out += "; exit " + std::to_string(r.exit_code) + " (first failure " + error_id(*f.code) +
             " " + std::string(error_entry(*f.code).name) + ")";
      break;
    }
  return out + "\n";
}

nlohmann::json render_json(const DoctorReport& r) {
  nlohmann::json j;
  j["qmpi"] = QMPI_VERSION;
  j["ranks"] = r.ranks;
  j["hosts"] = r.hosts;
  j["layout"] = {{"dp", r.layout.dp}, {"tp", r.layout.tp}, {"pp", r.layout.pp}};
  j["backend"] = r.backend;
  j["findings"] = nlohmann::json::array();
  int counts[3] = {0, 0, 0};
  for (const Finding& f : r.findings) {
    j["findings"].push_back(to_json(f));
    ++counts[int(f.status)];
  }
  j["comm"] = nlohmann::json::array();
  for (const CommMeasurement& m : r.comm) j["comm"].push_back(to_json(m));
  j["summary"] = {{"ok", counts[0]}, {"warn", counts[1]}, {"fail", counts[2]}};
  j["exit_code"] = r.exit_code;
  return j;
}

}  // namespace qmpi::doctor
