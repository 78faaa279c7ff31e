#include "batch/result_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void os_error(const std::string& what, const std::string& path) {
  raise(Err::OutputFile, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

ExistingResults resume_results(const std::string& path) {
  ExistingResults out;
  if (!std::filesystem::exists(path)) return out;
  std::ifstream in(path, std::ios::binary);
  if (!in) os_error("cannot read", path);
  std::string line;
  int64_t good_bytes = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline after it: a torn tail
    ++out.lines;
    good_bytes += int64_t(line.size()) + 1;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("custom_id") ||
        !j["custom_id"].is_string())
      raise(Err::OutputFile,
            path + " line " + std::to_string(out.lines) + " is not a qmpi result line",
            "Give --output a results file written by qmpi batch, or a new path.");
    out.ids.insert(j["custom_id"].get<std::string>());
  }
  in.close();
  std::error_code ec;
  const auto size = int64_t(std::filesystem::file_size(path, ec));
  if (!ec && size > good_bytes) {
    out.torn_bytes = size - good_bytes;
    if (::truncate(path.c_str(), good_bytes) != 0) os_error("cannot truncate", path);
  }
  return out;
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

ResultFile::ResultFile(const std::string& path, bool append, double fsync_interval_s)
    : path_(path), interval_s_(fsync_interval_s) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) os_error("cannot open", path);
  last_sync_s_ = now_s();
}

ResultFile::~ResultFile() {
  if (fd_ < 0) return;
  if (dirty_) ::fsync(fd_);
  ::close(fd_);
}

void ResultFile::write_line(std::string_view line) {
  std::string buf;
  buf.reserve(line.size() + 1);
  buf.append(line);
  buf.push_back('\n');
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      os_error("cannot write to", path_);
    }
    p += n;
    left -= size_t(n);
  }
  dirty_ = true;
  ++lines_;
  sync_if_due();
}

void ResultFile::sync_if_due() {
  if (dirty_ && now_s() - last_sync_s_ >= interval_s_) sync();
}

void ResultFile::sync() {
  if (dirty_ && ::fsync(fd_) != 0) os_error("cannot fsync", path_);
  dirty_ = false;
  last_sync_s_ = now_s();
}

std::vector<std::string> OrderedLines::put(int64_t index, std::string line) {
  held_.emplace(index, std::move(line));
  std::vector<std::string> ready;
  for (auto it = held_.begin(); it != held_.end() && it->first == next_; it = held_.erase(it)) {
    ready.push_back(std::move(it->second));
    ++next_;
  }
  return ready;
}

}  // namespace qmpi
