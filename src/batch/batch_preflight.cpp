#include "batch/batch_preflight.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "batch/batch_job.h"
#include "batch/batch_paths.h"
#include "batch/result_file.h"
#include "core/errors.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;

void check_input(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    raise(Err::InputFile, "the input file " + path + " does not exist", "Check the --input path.");
  if (!fs::is_regular_file(path, ec))
    raise(Err::InputFile, "the input " + path + " is not a file", "Give a JSONL file to --input.");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    raise(Err::InputFile, "cannot read the input file " + path,
          "Check the --input path and its permissions.");
  // Only the first byte that is not blank: a broken line is that line's error in the results,
  // but a file that does not start with an object is no request file at all (a model file, a
  // JSON array, a CSV).
  std::string head(3, '\0');
  in.read(head.data(), 3);
  if (head != "\xEF\xBB\xBF") in.seekg(0);  // a UTF-8 byte order mark is no content
  in.clear();
  char c = 0;
  while (in.get(c) && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
  }
  if (in && c != '{')
    raise(Err::InputFile,
          "the input file " + path + " is not JSONL: it does not start with a JSON object",
          "Give --input a file with one JSON request object per line (docs/batch.md).");
}

void check_output_folder(const std::string& path) {
  std::error_code ec;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec))
    raise(Err::OutputFile,
          "the folder of --output " + path + " (" + folder.string() + ") does not exist",
          "Create the folder, or choose another --output.");
  if (::access(folder.c_str(), W_OK) != 0 ||
      (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0))
    raise(Err::OutputFile, "--output " + path + " cannot be written (permission denied)",
          "Check the permissions of the file and its folder, or choose another --output.");
}

}  // namespace

void check_output_reusable(const BatchJobOptions& opts) {
  if (opts.resume || opts.overwrite) return;
  const int64_t lines = count_lines(opts.output);
  if (lines > 0)
    raise(Err::OutputFile,
          opts.output + " already holds " + std::to_string(lines) + " result lines",
          "Pass --resume to carry on with that job, --overwrite to start over, or choose "
          "another --output.");
}

void check_batch_files(const BatchJobOptions& opts) {
  check_distinct_batch_files(opts);
  check_input(opts.input);
  check_output_folder(opts.output);
  if (!opts.output_h5.empty()) check_output_folder(opts.output_h5);
  check_output_reusable(opts);
}

}  // namespace qmpi
