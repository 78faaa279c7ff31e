#include "doctor/visible_devices.h"

#include <algorithm>
#include <sstream>

namespace qmpi::doctor {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 6 && std::all_of(s.begin(), s.end(), ::isdigit);
}

}  // namespace

std::vector<VisibleDevicesProblem> check_visible_devices(const char* value, int runtime_count,
                                                         int physical_count) {
  std::vector<VisibleDevicesProblem> out;
  if (!value) return out;
  const std::string shown = std::string("CUDA_VISIBLE_DEVICES=\"") + value + "\"";
  std::vector<std::string> entries;
  std::stringstream in(value);
  for (std::string item; std::getline(in, item, ',');) entries.push_back(trim(item));
  if (entries.size() == 1 && entries[0].empty()) return out;  // "" hides every device on purpose

  std::vector<std::string> seen;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    const std::string pos = "entry " + std::to_string(i) + " ('" + e + "')";
    if (e.empty()) {
      out.push_back({shown + ": " + pos + " is empty",
                     "Remove the stray comma: list each GPU once, e.g. CUDA_VISIBLE_DEVICES=0,1."});
      continue;
    }
    if (std::find(seen.begin(), seen.end(), e) != seen.end()) {
      out.push_back({shown + ": " + pos +
                         " lists a GPU a second time; two ranks would share it "
                         "and the runtime ignores this entry and all after it",
                     "List each GPU once."});
      continue;
    }
    seen.push_back(e);
    if (is_index(e) && physical_count >= 0 && std::stoi(e) >= physical_count)
      out.push_back(
          {shown + ": " + pos + " is out of range: the host has " + std::to_string(physical_count) +
               " GPU(s), numbered 0-" + std::to_string(std::max(physical_count - 1, 0)),
           "Use indices below " + std::to_string(physical_count) + " (see `nvidia-smi -L`)."});
  }
  // Whatever the reason, entries past the ones the runtime accepted are silently dropped.
  const int listed = int(entries.size());
  if (out.empty() && runtime_count >= 0 && runtime_count < listed)
    out.push_back({shown + " lists " + std::to_string(listed) + " GPUs but the CUDA runtime sees " +
                       std::to_string(runtime_count) + ": entry " + std::to_string(runtime_count) +
                       " ('" + entries[size_t(runtime_count)] +
                       "') is not a usable device, so it and every entry after it are ignored",
                   "Check the entries against `nvidia-smi -L` (indices or GPU-/MIG- UUIDs)."});
  return out;
}

}  // namespace qmpi::doctor
