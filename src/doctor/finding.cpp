#include "doctor/finding.h"

#include <algorithm>
#include <map>

namespace qmpi::doctor {
namespace {

Finding make(std::string section, Status status, std::optional<Err> code, std::string message,
             std::string fix) {
  Finding f;
  f.section = std::move(section);
  f.status = status;
  f.code = code;
  f.message = std::move(message);
  f.fix = fix.empty() && code ? std::string(error_entry(*code).fix) : std::move(fix);
  return f;
}

// "rank 0", "rank 1", "rank 2", "rank 4" -> "ranks 0-2,4"; anything else is joined with ", ".
std::string join_places(const std::vector<std::string>& places) {
  if (places.size() == 1) return places.front();
  std::vector<int> ranks;
  for (const auto& p : places) {
    if (p.rfind("rank ", 0) != 0 || p.size() == 5 ||
        p.find_first_not_of("0123456789", 5) != std::string::npos)
      break;
    ranks.push_back(std::stoi(p.substr(5)));
  }
  std::string out;
  if (ranks.size() == places.size()) {
    std::sort(ranks.begin(), ranks.end());
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      out += (out.empty() ? "ranks " : ",") + std::to_string(ranks[i]) +
             (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
    return out;
  }
  for (const auto& p : places) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::Ok:
      return "OK";
    case Status::Warn:
      return "WARN";
    case Status::Fail:
      return "FAIL";
  }
  return "?";
}

Finding ok(std::string section, std::string message) {
  return make(std::move(section), Status::Ok, std::nullopt, std::move(message), {});
}

Finding warn(std::string section, Err code, std::string message, std::string fix) {
  return make(std::move(section), Status::Warn, code, std::move(message), std::move(fix));
}

Finding fail(std::string section, Err code, std::string message, std::string fix) {
  return make(std::move(section), Status::Fail, code, std::move(message), std::move(fix));
}

Finding fail(std::string section, const Error& e) {
  return make(std::move(section), Status::Fail, e.code(), e.message(), e.fix());
}

nlohmann::json to_json(const Finding& f) {
  nlohmann::json j = {
      {"section", f.section}, {"status", status_name(f.status)}, {"message", f.message}};
  if (f.code) {
    j["code"] = error_id(*f.code);
    j["name"] = std::string(error_entry(*f.code).name);
    j["fix"] = f.fix;
  }
  if (!f.where.empty()) j["where"] = f.where;
  return j;
}

Finding finding_from_json(const nlohmann::json& j) {
  Finding f;
  f.section = j.at("section").get<std::string>();
  const std::string s = j.at("status").get<std::string>();
  f.status = s == "FAIL" ? Status::Fail : s == "WARN" ? Status::Warn : Status::Ok;
  f.message = j.at("message").get<std::string>();
  if (j.contains("code")) {
    const std::string id = j["code"].get<std::string>();  // "QM208"
    f.code = Err(std::stoi(id.substr(2)));
    f.fix = j.value("fix", std::string());
  }
  f.where = j.value("where", std::string());
  return f;
}

const std::vector<std::string>& section_order() {
  static const std::vector<std::string> order = {"mpi", "cuda", "host", "model", "comm"};
  return order;
}

std::vector<Finding> merge_findings(const std::vector<Finding>& all) {
  struct Merged {
    Finding finding;
    std::vector<std::string> places;
  };
  std::vector<Merged> merged;
  std::map<std::string, size_t> index;
  for (const Finding& f : all) {
    const std::string key = f.section + '\x1f' + status_name(f.status) + '\x1f' +
                            (f.code ? error_id(*f.code) : "") + '\x1f' + f.message + '\x1f' + f.fix;
    auto [it, fresh] = index.emplace(key, merged.size());
    if (fresh) merged.push_back({f, {}});
    auto& places = merged[it->second].places;
    if (!f.where.empty() && std::find(places.begin(), places.end(), f.where) == places.end())
      places.push_back(f.where);
  }
  std::vector<Finding> out;
  const auto& order = section_order();
  auto rank_of = [&](const std::string& s) {
    return size_t(std::find(order.begin(), order.end(), s) - order.begin());
  };
  for (auto& m : merged) {
    m.finding.where = m.places.empty() ? "" : join_places(m.places);
    out.push_back(std::move(m.finding));
  }
  std::stable_sort(out.begin(), out.end(), [&](const Finding& a, const Finding& b) {
    return rank_of(a.section) < rank_of(b.section);
  });
  return out;
}

int exit_code_of(const std::vector<Finding>& merged) {
  for (const Finding& f : merged)
    if (f.status == Status::Fail) return error_entry(f.code.value_or(Err::Internal)).exit_code;
  return 0;
}

}  // namespace qmpi::doctor
