// The results file: whole lines, resume after a torn tail, and --ordered buffering.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../temp_dir.h"
#include "batch/result_file.h"
#include "core/errors.h"

namespace qmpi {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string result(const std::string& id) {
  return R"({"id":"batch_req_1","custom_id":")" + id + R"(","response":null,"error":null})";
}

TEST(ResultFile, AppendsWholeLines) {
  testing::TempDir dir;
  const std::string path = dir.file("out.jsonl");
  {
    ResultFile f(path, false, 0.0);
    f.write_line(result("a"));
    f.write_line(result("b"));
    EXPECT_EQ(f.lines_written(), 2);
  }
  {
    ResultFile f(path, true, 10.0);
    f.write_line(result("c"));
  }
  EXPECT_EQ(read_all(path), result("a") + "\n" + result("b") + "\n" + result("c") + "\n");
  EXPECT_EQ(count_lines(path), 3);
  {
    ResultFile f(path, false, 1.0);  // not appending: starts over
    f.write_line(result("d"));
  }
  EXPECT_EQ(read_all(path), result("d") + "\n");
}

TEST(ResultFile, ResumeCutsATornTailAndListsTheIds) {
  testing::TempDir dir;
  const std::string path = dir.file("out.jsonl");
  const std::string whole = result("a") + "\n" + result("b") + "\n";
  {
    std::ofstream out(path, std::ios::binary);
    out << whole << result("c").substr(0, 25);  // killed in the middle of a write
  }
  const ExistingResults r = resume_results(path);
  EXPECT_EQ(r.lines, 2);
  EXPECT_EQ(r.ids, (std::unordered_set<std::string>{"a", "b"}));
  EXPECT_EQ(r.torn_bytes, 25);
  EXPECT_EQ(read_all(path), whole) << "the torn line is cut off";
  {
    ResultFile f(path, true, 0.0);
    f.write_line(result("c"));
  }
  EXPECT_EQ(resume_results(path).ids.size(), 3u);
  EXPECT_EQ(resume_results(path).torn_bytes, 0);
}

TEST(ResultFile, ResumeOfAMissingOrEmptyFileIsEmpty) {
  testing::TempDir dir;
  EXPECT_EQ(resume_results(dir.file("none.jsonl")).lines, 0);
  std::ofstream(dir.file("empty.jsonl")).close();
  EXPECT_EQ(resume_results(dir.file("empty.jsonl")).lines, 0);
  std::ofstream(dir.file("torn.jsonl")) << "{\"custom_id\": \"x";
  const ExistingResults r = resume_results(dir.file("torn.jsonl"));
  EXPECT_EQ(r.lines, 0);
  EXPECT_EQ(std::filesystem::file_size(dir.file("torn.jsonl")), 0u);
}

TEST(ResultFile, ResumeRefusesAFileThatIsNotResults) {
  testing::TempDir dir;
  const std::string path = dir.file("other.jsonl");
  std::ofstream(path) << result("a") << "\nhello world\n" << result("b") << "\n";
  try {
    resume_results(path);
    FAIL() << "accepted a line that is not a result";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::OutputFile);
    EXPECT_NE(e.message().find("line 2"), std::string::npos) << e.message();
  }
  EXPECT_EQ(count_lines(path), 3) << "a refused file is left as it was";
}

TEST(OrderedLines, LeaveInInputOrder) {
  OrderedLines o;
  EXPECT_TRUE(o.put(2, "c").empty());
  EXPECT_TRUE(o.put(1, "b").empty());
  EXPECT_EQ(o.held(), 2u);
  EXPECT_EQ(o.put(0, "a"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(o.put(3, "d"), (std::vector<std::string>{"d"}));
  EXPECT_TRUE(o.put(5, "f").empty());
  EXPECT_EQ(o.put(4, "e"), (std::vector<std::string>{"e", "f"}));
  EXPECT_EQ(o.held(), 0u);
}

}  // namespace
}  // namespace qmpi
