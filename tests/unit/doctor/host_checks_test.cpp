// Host limits and the layout's memory against a budget.
#include "doctor/host_checks.h"

#include <gtest/gtest.h>

#include "model/presets.h"

namespace qmpi::doctor {
namespace {

HostLimits roomy() {
  HostLimits h;
  h.shm_present = true;
  h.shm_bytes = h.shm_free = uint64_t(8) << 30;
  h.open_files_soft = h.open_files_hard = 65536;
  return h;
}

TEST(HostChecks, RoomyHostIsOk) {
  for (const Finding& f : host_limit_findings(roomy()))
    EXPECT_EQ(f.status, Status::Ok) << f.message;
}

TEST(HostChecks, SmallShmWarns) {
  HostLimits h = roomy();
  h.shm_bytes = uint64_t(64) << 20;  // a container's default
  const auto fs = host_limit_findings(h);
  ASSERT_EQ(fs[0].status, Status::Warn);
  EXPECT_EQ(fs[0].code, Err::HostLimits);
  EXPECT_NE(fs[0].message.find("/dev/shm is 64 MiB"), std::string::npos) << fs[0].message;
  h.shm_present = false;
  EXPECT_EQ(host_limit_findings(h)[0].status, Status::Warn);
}

TEST(HostChecks, LowOpenFileLimitWarnsAndSaysHowToRaiseIt) {
  HostLimits h = roomy();
  h.open_files_soft = 1024;
  auto fs = host_limit_findings(h);
  ASSERT_EQ(fs[1].status, Status::Warn);
  EXPECT_NE(fs[1].fix.find("ulimit -n 65536"), std::string::npos) << fs[1].fix;
  h.open_files_hard = 1024;  // cannot be raised without root: the catalogue's advice
  fs = host_limit_findings(h);
  EXPECT_EQ(fs[1].fix, std::string(error_entry(Err::HostLimits).fix));
}

TEST(HostChecks, MemoryFitsOrFailsWithThePlannersSentence) {
  const ModelConfig half = preset_config("qwen2.5-0.5b");
  PlanInputs in;
  in.gpus = 6;
  in.backend = BackendKind::Cpu;
  in.host_mem = uint64_t(64) << 30;
  auto fs = memory_findings("host", half, Layout{2, 3, {}}, in, "test budget");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].status, Status::Ok) << fs[0].message;
  EXPECT_NE(fs[0].message.find("the biggest rank"), std::string::npos) << fs[0].message;

  in.host_mem = uint64_t(600) << 20;  // 100 MiB per rank: less than the runtime overhead alone
  fs = memory_findings("host", half, Layout{2, 3, {}}, in, "test budget");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].status, Status::Fail);
  EXPECT_EQ(fs[0].code, Err::WeightsDoNotFit) << fs[0].message;

  EXPECT_TRUE(memory_findings("host", half, Layout{15, 1, {}}, in, "x").empty());  // 14 heads
}

}  // namespace
}  // namespace qmpi::doctor
