#include "batch/batch_paths.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "batch/batch_job.h"
#include "core/errors.h"

namespace qmpi {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && ca == cb;
}

void check_distinct_batch_files(const BatchJobOptions& opts) {
  std::vector<std::pair<const char*, const std::string*>> files = {{"--input", &opts.input},
                                                                   {"--output", &opts.output}};
  if (!opts.output_h5.empty()) files.push_back({"--output-h5", &opts.output_h5});
  for (size_t i = 0; i < files.size(); ++i)
    for (size_t j = i + 1; j < files.size(); ++j)
      if (same_file(*files[i].second, *files[j].second))
        raise(Err::OutputFile,
              std::string(files[j].first) + " " + *files[j].second + " is the same file as " +
                  files[i].first + " " + *files[i].second +
                  (*files[i].second == *files[j].second ? "" : " under another name") +
                  ": writing it would destroy the other",
              "Write the results to another file.");
}

}  // namespace qmpi
