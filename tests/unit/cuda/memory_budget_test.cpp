// KV blocks from --gpu-memory-utilization (backend/cuda/memory_budget.h), on made-up devices.
#include "backend/cuda/memory_budget.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace qmpi::cuda {
namespace {

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

KvBudgetInput h200() {
  KvBudgetInput in;
  in.total_bytes = 140 * GiB;
  in.free_bytes = 130 * GiB;
  in.utilization = 0.9;
  in.weight_bytes = 1 * GiB;
  in.workspace_bytes = 512 * MiB;
  in.overhead_bytes = 1 * GiB;
  in.bytes_per_block = 2 * MiB;
  return in;
}

Err code_of(const KvBudgetInput& in) {
  try {
    plan_kv_blocks(in);
  } catch (const Error& e) {
    return e.code();
  }
  return Err::Internal;
}

TEST(MemoryBudget, BudgetLessWeightsWorkspaceAndOverheadInWholeBlocks) {
  const KvBudget b = plan_kv_blocks(h200());
  const uint64_t budget = uint64_t(140.0 * 0.9 * double(GiB));
  EXPECT_EQ(b.rank_budget_bytes, budget);
  const uint64_t kv = budget - GiB - 512 * MiB - GiB;
  EXPECT_EQ(b.num_blocks, int64_t(kv / (2 * MiB)));
  EXPECT_EQ(b.kv_bytes, uint64_t(b.num_blocks) * 2 * MiB);
  EXPECT_FALSE(b.limited_by_free);
}

TEST(MemoryBudget, RanksSharingADeviceSplitTheBudget) {
  KvBudgetInput in = h200();
  in.ranks_per_device = 6;
  const KvBudget b = plan_kv_blocks(in);
  EXPECT_EQ(b.rank_budget_bytes, uint64_t(140.0 * 0.9 * double(GiB)) / 6);
  EXPECT_EQ(b.num_blocks, int64_t((b.rank_budget_bytes - GiB - 512 * MiB - GiB) / (2 * MiB)));
}

TEST(MemoryBudget, FreeMemoryCapsTheCacheWhenOthersHoldTheDevice) {
  KvBudgetInput in = h200();
  in.free_bytes = 11 * GiB;  // another process holds most of the device
  const KvBudget b = plan_kv_blocks(in);
  EXPECT_TRUE(b.limited_by_free);
  EXPECT_EQ(b.num_blocks, int64_t((11 * GiB - GiB) / (2 * MiB)));
}

TEST(MemoryBudget, ErrorsNameTheReason) {
  KvBudgetInput in = h200();
  in.utilization = 0.0;
  EXPECT_EQ(code_of(in), Err::Usage);
  in.utilization = 1.5;
  EXPECT_EQ(code_of(in), Err::Usage);

  in = h200();
  in.weight_bytes = 130 * GiB;
  EXPECT_EQ(code_of(in), Err::WeightsDoNotFit);

  in = h200();
  in.weight_bytes = uint64_t(140.0 * 0.9 * double(GiB)) - in.workspace_bytes - in.overhead_bytes -
                    MiB;  // 1 MiB left, a block needs 2
  EXPECT_EQ(code_of(in), Err::KvCacheDoesNotFit);

  in = h200();
  in.free_bytes = in.overhead_bytes;  // nothing free beyond the overhead
  EXPECT_EQ(code_of(in), Err::KvCacheDoesNotFit);
}

TEST(MemoryBudget, WeightsDoNotFitMessageHasTheNumbers) {
  KvBudgetInput in = h200();
  in.weight_bytes = 200 * GiB;
  try {
    plan_kv_blocks(in);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("204800.0 MiB"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("budget"), std::string::npos) << e.message();
  }
}

MemoryCounters after_profile() {
  MemoryCounters c;
  c.in_use[size_t(MemPurpose::Weights)] = 5 * GiB;
  c.in_use[size_t(MemPurpose::Buffers)] = 300 * MiB;  // the model's step-sized scratch, kept
  c.in_use[size_t(MemPurpose::Scratch)] = 40 * MiB;   // cuBLAS workspace, GEMM inputs
  c.peak = c.in_use;
  // During the step: + 64 MiB of hidden states and a 2 MiB throwaway KV block, freed since.
  c.peak[size_t(MemPurpose::Buffers)] = 300 * MiB + 64 * MiB + 2 * MiB;
  return c;
}

TEST(MemoryBudget, MeasuredInputLeavesTheThrowawayCacheOutOfTheWorkspace) {
  const DeviceMemory mem{/*free=*/100 * GiB, /*total=*/140 * GiB};
  const KvBudgetInput in = kv_budget_input(mem, after_profile(), 0.9, 2, GiB, 2 * MiB, 2 * MiB);
  EXPECT_EQ(in.total_bytes, 140 * GiB);
  EXPECT_EQ(in.weight_bytes, 5 * GiB);
  EXPECT_EQ(in.workspace_bytes, 300 * MiB + 64 * MiB + 40 * MiB);
  // The hidden states come back when the engine runs: not free for the KV cache.
  EXPECT_EQ(in.free_bytes, 100 * GiB - 64 * MiB);
  EXPECT_EQ(in.utilization, 0.9);
  EXPECT_EQ(in.ranks_per_device, 2);
  EXPECT_EQ(in.overhead_bytes, GiB);
  EXPECT_EQ(in.bytes_per_block, 2 * MiB);
}

TEST(MemoryBudget, MeasuredInputNeverUnderflows) {
  const DeviceMemory mem{/*free=*/10 * MiB, /*total=*/140 * GiB};
  const KvBudgetInput in = kv_budget_input(mem, after_profile(), 0.9, 1, GiB, 2 * MiB, GiB);
  EXPECT_EQ(in.workspace_bytes, 0u);  // a profile cache larger than the peak: nothing left
  EXPECT_EQ(in.free_bytes, 10 * MiB);
  const KvBudgetInput tight = kv_budget_input(mem, after_profile(), 0.9, 1, GiB, 2 * MiB, 2 * MiB);
  EXPECT_EQ(tight.free_bytes, 0u);  // 10 MiB free, 64 MiB of hidden states to come back
}

}  // namespace
}  // namespace qmpi::cuda
