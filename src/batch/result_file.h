// The results file of a batch job: whole lines appended with one write each, fsync'd at least
// every few seconds and at close, so a job killed at any moment leaves complete lines plus at
// most one torn tail, which --resume cuts off before it carries on.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace qmpi {

struct ExistingResults {
  std::unordered_set<std::string> ids;  // custom_id of every complete line
  int64_t lines = 0;
  int64_t torn_bytes = 0;  // cut from the end (a line the previous run did not finish)
};

// For --resume: reads `path` (missing = empty), truncates a torn last line and returns the ids
// done. Raises OutputFile when a complete line is not a result line.
ExistingResults resume_results(const std::string& path);

// Complete lines already in `path` (0 when it does not exist).
int64_t count_lines(const std::string& path);

class ResultFile {
 public:
  // Creates or truncates `path`, or appends to it with `append`.
  ResultFile(const std::string& path, bool append, double fsync_interval_s);
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  // Appends `line` and a newline in one write.
  void write_line(std::string_view line);
  void sync_if_due();
  void sync();
  int64_t lines_written() const { return lines_; }

 private:
  std::string path_;
  int fd_ = -1;
  double interval_s_;
  double last_sync_s_ = 0.0;
  bool dirty_ = false;
  int64_t lines_ = 0;
};

// --ordered: lines arrive in completion order and leave in input order.
class OrderedLines {
 public:
  // Takes line number `index` (0, 1, 2, ... over the lines of this run) and returns the lines
  // that can now go out, in order.
  std::vector<std::string> put(int64_t index, std::string line);
  size_t held() const { return held_.size(); }

 private:
  int64_t next_ = 0;
  std::map<int64_t, std::string> held_;
};

}  // namespace qmpi
