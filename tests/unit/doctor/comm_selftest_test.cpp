// The self-test's pairings, sizes and bandwidth arithmetic, and its findings.
#include "doctor/comm_selftest.h"

#include <gtest/gtest.h>

#include "doctor/report.h"

namespace qmpi::doctor {
namespace {

using Pairs = std::vector<std::pair<int, int>>;

TEST(CommSelfTest, PipelineNeighboursPairTheSameTpRankOfConsecutiveStages) {
  const auto rounds = p2p_rounds(2, 3);
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[0], (Pairs{{0, 2}, {1, 3}}));
  EXPECT_EQ(rounds[1], (Pairs{{2, 4}, {3, 5}}));
}

TEST(CommSelfTest, WithoutStagesTpRanksArePaired) {
  EXPECT_EQ(p2p_rounds(6, 1), (std::vector<Pairs>{{{0, 1}, {2, 3}, {4, 5}}}));
  EXPECT_EQ(p2p_rounds(3, 1), (std::vector<Pairs>{{{0, 1}}}));
  EXPECT_TRUE(p2p_rounds(1, 1).empty());
  EXPECT_EQ(p2p_rounds(1, 2), (std::vector<Pairs>{{{0, 1}}}));
}

TEST(CommSelfTest, BusBandwidthFactorIsTheRingAllReduceTraffic) {
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(6), 10.0 / 6.0);
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(1), 0.0);
}

TEST(CommSelfTest, SizesParseAndRoundUpToWholeFloats) {
  EXPECT_EQ(parse_comm_sizes("8,1MiB,64MiB"),
            (std::vector<uint64_t>{8, uint64_t(1) << 20, uint64_t(64) << 20}));
  EXPECT_EQ(parse_comm_sizes("5"), (std::vector<uint64_t>{8}));
  EXPECT_THROW(parse_comm_sizes("0"), Error);
  EXPECT_THROW(parse_comm_sizes("lots"), Error);
  EXPECT_GT(iterations_for(8), iterations_for(uint64_t(64) << 20));
}

CommMeasurement measured(const std::string& group, const std::string& op, uint64_t bytes, double us,
                         bool correct = true) {
  CommMeasurement m;
  m.group = group;
  m.op = op;
  m.ranks = 2;
  m.bytes = bytes;
  m.iterations = 3;
  m.seconds = us / 1e6;
  m.algbw = double(bytes) / m.seconds / 1e9;
  m.busbw = m.algbw;
  m.correct = correct;
  if (!correct) m.error = "world rank 1 got wrong data: element 3 is 0 instead of 12";
  return m;
}

TEST(CommSelfTest, FindingsGiveLatencyAndBandwidthOrTheWrongData) {
  const std::vector<CommMeasurement> all = {
      measured("tp group 0", "all-reduce", 8, 20.0),
      measured("tp group 0", "all-reduce", uint64_t(64) << 20, 50000.0),
      measured("tp group 1", "all-reduce", 8, 20.0),
      measured("tp group 1", "all-reduce", uint64_t(1) << 20, 900.0, false)};
  const auto fs = comm_findings(all);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].status, Status::Ok);
  EXPECT_NE(fs[0].message.find("20.0 us at 8 B, busbw 1.34 GB/s at 64 MiB"), std::string::npos)
      << fs[0].message;
  EXPECT_EQ(fs[1].status, Status::Fail);
  EXPECT_EQ(fs[1].code, Err::CommWrongResult);
  EXPECT_NE(fs[1].message.find("1 MiB: world rank 1 got wrong data"), std::string::npos)
      << fs[1].message;
}

TEST(CommSelfTest, MeasurementsSurviveJson) {
  const CommMeasurement m = measured("stage 0 -> 1", "send-recv", 1 << 20, 150.0);
  const CommMeasurement back = measurement_from_json(to_json(m));
  EXPECT_EQ(back.group, m.group);
  EXPECT_EQ(back.bytes, m.bytes);
  EXPECT_NEAR(back.seconds, m.seconds, 1e-12);
  EXPECT_DOUBLE_EQ(back.algbw, m.algbw);
  EXPECT_TRUE(back.correct);
}

TEST(Report, TextShowsCodesFixesOnceAndTheSummary) {
  DoctorReport r;
  r.layout = Layout{2, 3, {}};
  r.backend = "cpu";
  r.findings = merge_findings({ok("mpi", "world: 6 ranks"),
                               fail("model", Err::TensorShapeMismatch, "tensor 'a' is wrong"),
                               fail("model", Err::TensorShapeMismatch, "tensor 'b' is wrong")});
  r.comm = {measured("tp group 0", "all-reduce", 8, 20.0)};
  r.findings.push_back(comm_findings(r.comm)[0]);
  r.exit_code = exit_code_of(r.findings);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("  FAIL  QM210 tensor-shape-mismatch: tensor 'a' is wrong\n"),
            std::string::npos)
      << text;
  const std::string fix = "fix: " + std::string(error_entry(Err::TensorShapeMismatch).fix);
  EXPECT_EQ(text.find(fix), text.rfind(fix)) << text;  // once for the run of two
  EXPECT_NE(text.find("busbw GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("summary: 2 OK, 0 WARN, 2 FAIL; exit 3 (first failure QM210"),
            std::string::npos)
      << text;
  const nlohmann::json j = render_json(r);
  EXPECT_EQ(j["summary"]["fail"], 2);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["comm"][0]["bytes"], 8);
}

}  // namespace
}  // namespace qmpi::doctor
