// --output-h5: the generated token ids, their log-probabilities and timings of every choice in
// one HDF5 file, as ragged datasets (one row per choice; its tokens are
// token_ids[token_start : token_start + token_count]). The layout is in docs/batch.md.
// Rows are buffered and written at each flush (the job flushes with its fsync of the JSONL),
// so a killed job loses at most the rows since the last flush; --resume appends to the file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace qmpi {

struct H5Row {
  int64_t line = 0;  // 1-based line of the input file
  std::string custom_id;
  int32_t choice = 0;
  int64_t prompt_tokens = 0;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::string finish_reason;
  double ttft_s = 0.0;     // from the request's arrival at the scheduler to its first token
  double latency_s = 0.0;  // from arrival to the last token
  double finished_unix = 0.0;
};

class H5Results {
 public:
  // Creates `path` (replacing it), or with `resume` appends to it when it can be read (an
  // unreadable one is moved aside to PATH.broken and a new one started, with a warning).
  H5Results(const std::string& path, bool resume);
  ~H5Results();
  H5Results(const H5Results&) = delete;
  H5Results& operator=(const H5Results&) = delete;

  void append(H5Row row);
  // Writes the buffered rows and flushes the file.
  void flush();
  // custom_ids of the rows the file held when it was opened.
  const std::unordered_set<std::string>& existing_ids() const { return existing_; }
  int64_t rows() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::unordered_set<std::string> existing_;
};

}  // namespace qmpi
