// Findings merge across ranks and hosts, keep section order, and give the exit code of the
// first failure.
#include "doctor/finding.h"

#include <gtest/gtest.h>

namespace qmpi::doctor {
namespace {

Finding at(Finding f, const std::string& where) {
  f.where = where;
  return f;
}

TEST(Finding, WarnAndFailCarryTheCatalogueFixUnlessGivenOne) {
  const Finding w = warn("host", Err::HostLimits, "small /dev/shm");
  EXPECT_EQ(w.fix, std::string(error_entry(Err::HostLimits).fix));
  const Finding f = fail("model", Err::ShardMissing, "gone", "Download it.");
  EXPECT_EQ(f.fix, "Download it.");
  EXPECT_FALSE(ok("mpi", "fine").code.has_value());
}

TEST(Finding, IdenticalFindingsOfSeveralRanksBecomeOneWithTheirRanksJoined) {
  std::vector<Finding> all;
  for (int r : {4, 0, 1, 2})
    all.push_back(at(fail("cuda", Err::VisibleDevices, "no device"), "rank " + std::to_string(r)));
  all.push_back(at(ok("host", "/dev/shm: 8 GiB"), "host a"));
  all.push_back(at(ok("host", "/dev/shm: 8 GiB"), "host b"));
  all.push_back(ok("mpi", "world"));
  const auto merged = merge_findings(all);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].section, "mpi");  // section order, not arrival order
  EXPECT_EQ(merged[1].section, "cuda");
  EXPECT_EQ(merged[1].where, "ranks 0-2,4");
  EXPECT_EQ(merged[2].where, "host a, host b");
}

TEST(Finding, ExitCodeIsTheFirstFailureInSectionOrder) {
  std::vector<Finding> all = {ok("mpi", "a"), warn("host", Err::HostLimits, "b")};
  EXPECT_EQ(exit_code_of(merge_findings(all)), 0);         // warnings do not fail
  all.push_back(fail("comm", Err::CommWrongResult, "c"));  // exit 4
  all.push_back(fail("model", Err::ShardTruncated, "d"));  // exit 3, earlier section
  const auto merged = merge_findings(all);
  EXPECT_EQ(exit_code_of(merged), error_entry(Err::ShardTruncated).exit_code);
  EXPECT_EQ(error_entry(Err::ShardTruncated).exit_code, 3);
}

TEST(Finding, JsonRoundTripKeepsEveryField) {
  Finding f =
      at(fail("model", Err::TensorShapeMismatch, "tensor 'x' has shape [2]", "Fix."), "host h");
  const Finding back = finding_from_json(to_json(f));
  EXPECT_EQ(back.section, "model");
  EXPECT_EQ(back.status, Status::Fail);
  ASSERT_TRUE(back.code.has_value());
  EXPECT_EQ(*back.code, Err::TensorShapeMismatch);
  EXPECT_EQ(back.message, f.message);
  EXPECT_EQ(back.fix, "Fix.");
  EXPECT_EQ(back.where, "host h");
  EXPECT_EQ(to_json(f)["code"], "QM210");
}

}  // namespace
}  // namespace qmpi::doctor
