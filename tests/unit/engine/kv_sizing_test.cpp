// KV block counts (engine/kv_sizing.h): the fixed rules, the profiling step's shape, ranks per
// device, and the ranks' agreement on one count, with made-up peers behind a fake world comm.
#include "engine/kv_sizing.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../expect_error.h"
#include "core/errors.h"

namespace qmpi {
namespace {

// This process is world rank `rank`; the other ranks' all_gather contributions and the text a
// failed root broadcasts are canned. Records how many collectives ran.
class FakeWorld final : public Comm {
 public:
  FakeWorld(int rank, std::vector<int64_t> others_values, std::string root_text = {})
      : rank_(rank), values_(std::move(others_values)), root_text_(std::move(root_text)) {}
  int rank() const override { return rank_; }
  int size() const override { return int(values_.size()); }
  std::string describe() const override { return "fake world"; }
  void all_reduce_sum(float*, size_t) override { ADD_FAILURE() << "unexpected all_reduce"; }
  void all_gather(const void* send, void* recv, size_t bytes) override {
    EXPECT_EQ(bytes, sizeof(int64_t));
    ++gathers;
    std::vector<int64_t> all = values_;
    std::memcpy(&all[size_t(rank_)], send, bytes);
    std::memcpy(recv, all.data(), all.size() * bytes);
  }
  void broadcast(void* data, size_t bytes, int root) override {
    ++broadcasts;
    roots.push_back(root);
    if (root == rank_) {
      if (bytes != sizeof(uint64_t)) sent.assign(static_cast<char*>(data), bytes);
      return;
    }
    if (bytes == sizeof(uint64_t) && broadcasts == 1) {
      const uint64_t n = root_text_.size();
      std::memcpy(data, &n, sizeof n);
    } else {
      std::memcpy(data, root_text_.data(), bytes);
    }
  }
  void send(const void*, size_t, int) override { ADD_FAILURE() << "unexpected send"; }
  void recv(void*, size_t, int) override { ADD_FAILURE() << "unexpected recv"; }
  void barrier() override {}

  int gathers = 0, broadcasts = 0;
  std::vector<int> roots;
  std::string sent;  // what this rank broadcast as root

 private:
  int rank_;
  std::vector<int64_t> values_;
  std::string root_text_;
};

TEST(KvSizing, FixedCountIsWholeBlocksOfEverySequence) {
  EXPECT_EQ(blocks_for_sequences(1, 8192, 16), 512);
  EXPECT_EQ(blocks_for_sequences(4, 100, 16), 4 * 7);  // 100 tokens need 7 blocks of 16
  EXPECT_EQ(blocks_for_sequences(2, 16, 16), 2);
}

TEST(KvSizing, ProfileStepIsTheLargestStep) {
  // batch / serve: --max-batched-tokens, logits for at most max_num_seqs rows.
  ProfileShape s = profile_shape(2048, 8192, 16);
  EXPECT_EQ(s.tokens, 2048);
  EXPECT_EQ(s.logit_rows, 16);
  // run / logits: a whole prompt of max_model_len in one step, one sampled row.
  s = profile_shape(0, 8192, 1);
  EXPECT_EQ(s.tokens, 8192);
  EXPECT_EQ(s.logit_rows, 1);
  // More sequences than tokens in a step: one logit row per token at most.
  s = profile_shape(8, 4096, 32);
  EXPECT_EQ(s.tokens, 8);
  EXPECT_EQ(s.logit_rows, 8);
  s = profile_shape(0, 16, 64);
  EXPECT_EQ(s.tokens, 64);
  EXPECT_EQ(s.logit_rows, 64);
  // Speculative decoding with 4 guesses: logits for each guess and the last real token.
  s = profile_shape(2048, 8192, 16, 4);
  EXPECT_EQ(s.logit_rows, 80);
  s = profile_shape(64, 8192, 16, 4);
  EXPECT_EQ(s.logit_rows, 64);  // never more rows than the step's tokens
}

Placement at(int rank, const std::string& host, int device) {
  Placement p;
  p.rank = rank;
  p.host = host;
  p.device_index = device;
  return p;
}

TEST(KvSizing, RanksSharingADeviceCountSameHostAndOrdinal) {
  // Six ranks on one GPU (--comm mpi), as bench/gpu_check.sh runs them.
  std::vector<Placement> one_gpu;
  for (int r = 0; r < 6; ++r) one_gpu.push_back(at(r, "h0", 0));
  EXPECT_EQ(ranks_sharing_device(one_gpu, 3), 6);
  // Two hosts with GPUs 0 and 1 each: ordinal 0 on h1 is another device than on h0.
  const std::vector<Placement> two_hosts{at(0, "h0", 0), at(1, "h0", 1), at(2, "h1", 0),
                                         at(3, "h1", 0)};
  EXPECT_EQ(ranks_sharing_device(two_hosts, 0), 1);
  EXPECT_EQ(ranks_sharing_device(two_hosts, 2), 2);
  // CPU ranks have no device.
  const std::vector<Placement> cpu{at(0, "h0", -1), at(1, "h0", -1)};
  EXPECT_EQ(ranks_sharing_device(cpu, 1), 1);
}

TEST(KvSizing, CpuRanksShareTheirHost) {
  const std::vector<Placement> cpu{at(0, "h0", -1), at(1, "h0", -1), at(2, "h1", -1)};
  EXPECT_EQ(ranks_on_host(cpu, 1), 2);
  EXPECT_EQ(ranks_on_host(cpu, 2), 1);
}

TEST(KvSizing, CpuBlocksComeFromTheBudgetUpToWhatTheSequencesCanUse) {
  // 1 KiB blocks of 16 tokens; one 256-token sequence is 16 blocks.
  EXPECT_EQ(cpu_kv_blocks(100 << 10, 1024, 64, 256, 16), 100);  // the budget limits
  EXPECT_EQ(cpu_kv_blocks(100 << 20, 1024, 4, 256, 16), 64);    // 4 sequences are all it needs
  EXPECT_EQ(cpu_kv_blocks(16 << 10, 1024, 4, 256, 16), 16);     // exactly one sequence
  testing::expect_error([] { cpu_kv_blocks(15 << 10, 1024, 4, 256, 16); }, Err::KvCacheDoesNotFit,
                        {"15 KiB", "15 blocks", "256 tokens", "needs 16"});
}

TEST(KvSizing, ChoiceIsTheSmallestRoomAndNamesTheRank) {
  const std::vector<int64_t> rooms{900, 700, 800, 700};
  const KvBlockChoice c = choose_kv_blocks(rooms);
  EXPECT_EQ(c.blocks, 700);
  EXPECT_EQ(c.limiting_rank, 1);
  EXPECT_EQ(c.failed_rank, -1);

  const std::vector<int64_t> failed{900, -151, 800, -150};
  const KvBlockChoice f = choose_kv_blocks(failed);
  EXPECT_EQ(f.failed_rank, 1);
  EXPECT_EQ(f.blocks, 0);
}

TEST(KvSizing, AgreementTakesTheMinimumOverAllRanks) {
  FakeWorld world(2, {5000, 4200, 0, 4800});
  const int64_t blocks = agree_on_kv_blocks(world, "rank 2 h0:cuda:0", [] { return 6000; });
  EXPECT_EQ(blocks, 4200);
  EXPECT_EQ(world.gathers, 1);
  EXPECT_EQ(world.broadcasts, 0);
}

TEST(KvSizing, AnotherRanksErrorIsRaisedEverywhereWithItsTag) {
  // Rank 1 found no room; this rank (0) had room and reports rank 1's error.
  FakeWorld world(
      0, {0, -int64_t(Err::WeightsDoNotFit), 900},
      std::string("rank 1 h0:cuda:1: weights 80.0 GiB exceed the budget") + '\0' + "Use more GPUs");
  testing::expect_error([&] { agree_on_kv_blocks(world, "rank 0 h0:cuda:0", [] { return 1000; }); },
                        Err::WeightsDoNotFit, {"rank 1 h0:cuda:1", "80.0 GiB"});
  EXPECT_EQ(world.gathers, 1);
  ASSERT_EQ(world.roots.size(), 2u);  // the length, then the text, from rank 1
  EXPECT_EQ(world.roots[0], 1);
  EXPECT_EQ(world.roots[1], 1);
}

TEST(KvSizing, OwnErrorIsSharedAndRaisedWithTheRankTag) {
  FakeWorld world(1, {1000, 0});
  try {
    agree_on_kv_blocks(world, "rank 1 h0:cuda:0", []() -> int64_t {
      raise(Err::KvCacheDoesNotFit, "one KV block needs 2.0 MiB but only 1.0 MiB are left",
            "Lower --max-model-len");
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::KvCacheDoesNotFit);
    EXPECT_EQ(e.message(),
              "rank 1 h0:cuda:0: one KV block needs 2.0 MiB but only 1.0 MiB are left");
    EXPECT_EQ(e.fix(), "Lower --max-model-len");
  }
  EXPECT_EQ(world.sent, std::string("rank 1 h0:cuda:0: one KV block needs 2.0 MiB but only 1.0 "
                                    "MiB are left") +
                            '\0' + "Lower --max-model-len");
}

TEST(KvSizing, RuntimeErrorsPropagateWithoutACollective) {
  // A CUDA failure aborts the job through run_engine; waiting for the peers would hang it.
  FakeWorld world(0, {0, 1000});
  testing::expect_error(
      [&] {
        agree_on_kv_blocks(world, "rank 0 h0:cuda:0",
                           []() -> int64_t { raise(Err::CudaError, "cudaMemGetInfo failed"); });
      },
      Err::CudaError, {"cudaMemGetInfo"});
  EXPECT_EQ(world.gathers, 0);
}

}  // namespace
}  // namespace qmpi
