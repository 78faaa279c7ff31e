// The QMPI_DUMP debug hook: which names it writes, where, and what it refuses.
#include "model/tensor_dump.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../temp_dir.h"
#include "backend/cpu/cpu_backend.h"
#include "core/errors.h"
#include "io/npy.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;

TEST(TensorDump, WritesOnlyTheNamedLayerAndTensor) {
  testing::TempDir dir;
  auto be = make_cpu_backend();
  TensorDump dump("layer.3.attn_out,layer.*.hidden", dir.str(), 2);
  EXPECT_TRUE(dump.enabled());
  dump.next_step();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  dump(*be, 3, "attn_out", x.data(), 2, 3);
  dump(*be, 4, "attn_out", x.data(), 2, 3);  // not asked for
  dump(*be, 1, "hidden", x.data(), 3, 2);
  dump(*be, 3, "q", x.data(), 1, 6);  // not asked for
  const NpyArray a = read_npy_f32(dir.file("layer.3.attn_out.rank2.step0.npy"));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, x);
  EXPECT_EQ(read_npy_f32(dir.file("layer.1.hidden.rank2.step0.npy")).shape,
            (std::vector<int64_t>{3, 2}));
  EXPECT_FALSE(fs::exists(dir.file("layer.4.attn_out.rank2.step0.npy")));
  EXPECT_FALSE(fs::exists(dir.file("layer.3.q.rank2.step0.npy")));
  dump.next_step();
  dump(*be, 3, "attn_out", x.data(), 2, 3);
  EXPECT_TRUE(fs::exists(dir.file("layer.3.attn_out.rank2.step1.npy")));
}

TEST(TensorDump, EmptySpecDumpsNothing) {
  EXPECT_FALSE(TensorDump().enabled());
  EXPECT_FALSE(TensorDump("", ".", 0).enabled());
}

TEST(TensorDump, BadEntriesAreUsageErrorsNamingTheKnownTensors) {
  for (const char* bad : {"layer.3.nope", "attn_out", "layer.x.hidden", "layer.3"}) {
    try {
      TensorDump(bad, ".", 0);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::Usage) << bad;
    }
  }
  try {
    TensorDump("layer.0.nope", ".", 0);
  } catch (const Error& e) {
    EXPECT_NE(e.fix().find("router_logits"), std::string::npos) << e.fix();
  }
}

}  // namespace
}  // namespace qmpi
