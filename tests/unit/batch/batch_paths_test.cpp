// Issue 19, item 5: --output (or --output-h5) naming the input, directly or through a link, is
// refused before anything is written, and the input is left as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir.h"
#include "batch/batch_job.h"
#include "batch/batch_paths.h"

#include "core/errors.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(BatchPaths, SameFileThroughLinksAndOtherNames) {
  TempDir dir;
  const std::string in = dir.file("in.jsonl");
  std::ofstream(in) << "{}\n";
  fs::create_symlink(in, dir.file("link.jsonl"));
  fs::create_hard_link(in, dir.file("hard.jsonl"));
  fs::create_directory(dir.file("sub"));
  EXPECT_TRUE(same_file(in, in));
  EXPECT_TRUE(same_file(in, dir.file("link.jsonl")));
  EXPECT_TRUE(same_file(in, dir.file("hard.jsonl")));
  EXPECT_TRUE(same_file(in, dir.file("sub/../in.jsonl")));
  EXPECT_FALSE(same_file(in, dir.file("out.jsonl")));                 // not there yet
  EXPECT_TRUE(same_file(dir.file("a.h5"), dir.file("sub/../a.h5")));  // neither there yet
  EXPECT_FALSE(same_file(dir.file("a.h5"), dir.file("b.h5")));
}

TEST(BatchPaths, EveryPairIsChecked) {
  TempDir dir;
  const std::string in = dir.file("in.jsonl");
  std::ofstream(in) << "{\"id\": 1, \"prompt\": \"x\"}\n";
  fs::create_symlink(in, dir.file("link.jsonl"));
  BatchJobOptions o;
  o.input = in;
  o.output = dir.file("out.jsonl");
  EXPECT_NO_THROW(check_distinct_batch_files(o));
  o.output_h5 = dir.file("out.h5");
  EXPECT_NO_THROW(check_distinct_batch_files(o));
  for (const auto& [output, h5] : std::vector<std::pair<std::string, std::string>>{
           {in, ""},
           {dir.file("link.jsonl"), ""},
           {dir.file("out.jsonl"), in},
           {dir.file("out.jsonl"), dir.file("out.jsonl")}}) {
    o.output = output;
    o.output_h5 = h5;
    try {
      check_distinct_batch_files(o);
      ADD_FAILURE() << output << " / " << h5 << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::OutputFile);
      EXPECT_THAT(e.message(), ::testing::HasSubstr("same file"));
    }
  }
  EXPECT_EQ(fs::file_size(in), 25u) << "the input is untouched";
}

}  // namespace
}  // namespace qmpi
