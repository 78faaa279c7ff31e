// The host half of CUDA attention (backend/cuda/attention_plan.h): row-to-sequence map, the
// block-table length uploaded, and the CPU backend's checks on inconsistent metadata.
#include "backend/cuda/attention_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/errors.h"

namespace qmpi::cuda {
namespace {

struct Fixture {
  std::vector<AttentionSeq> seqs;
  std::vector<int32_t> tables;
  std::vector<float> k, v;
  AttentionBatch batch;
  KvLayerView kv;

  Fixture(std::vector<AttentionSeq> s, std::vector<int32_t> t)
      : seqs(std::move(s)), tables(std::move(t)), k(16 * 4 * 2 * 8), v(k.size()) {
    batch.seqs = seqs.data();
    batch.num_seqs = int32_t(seqs.size());
    batch.block_tables = tables.data();
    batch.num_heads = 4;
    batch.num_kv_heads = 2;
    batch.head_dim = 8;
    kv = {k.data(), v.data(), 16, 4, 2, 8};
  }
};

Err code_of(const Fixture& f) {
  try {
    plan_attention(f.batch, f.kv);
  } catch (const Error& e) {
    return e.code();
  }
  return Err::Usage;  // "no error"
}

TEST(AttentionPlan, MapsRowsToSequencesAndCountsTableEntries) {
  // A prefill of 5 tokens (ctx 5: 2 blocks), a decode (ctx 9: 3 blocks) and a chunk of 2 new
  // tokens in a context of 6 (2 blocks), the last with its table further on.
  Fixture f({{0, 5, 5, 0}, {5, 1, 9, 2}, {6, 2, 6, 6}}, {3, 1, 0, 2, 4, 15, 7, 8});
  const AttentionPlan p = plan_attention(f.batch, f.kv);
  EXPECT_EQ(p.rows, 8);
  EXPECT_EQ(p.row_seq, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 2, 2}));
  EXPECT_EQ(p.table_entries, 8);
  EXPECT_EQ(p.max_keys, 9);  // the decode's context: what a flash-decoding split divides
}

TEST(AttentionPlan, HeadMapIsTheBatchsOrTheEvenGroups) {
  Fixture even({{0, 1, 1, 0}}, {0});
  EXPECT_EQ(plan_attention(even.batch, even.kv).kv_head_of, (std::vector<int32_t>{0, 0, 1, 1}));
  Fixture uneven({{0, 1, 1, 0}}, {0});
  const std::vector<int32_t> map{0, 0, 0, 1};  // an uneven TP rank's groups of 3 and 1
  uneven.batch.kv_head_of = map.data();
  EXPECT_EQ(plan_attention(uneven.batch, uneven.kv).kv_head_of, map);
  const std::vector<int32_t> unread{0, 0, 0, 0};  // KV head 1 held but never read
  uneven.batch.kv_head_of = unread.data();
  EXPECT_THROW(plan_attention(uneven.batch, uneven.kv), Error);
}

TEST(AttentionPlan, RowsOfNoSequenceAreMarked) {
  Fixture f({{2, 1, 3, 0}}, {0});
  const AttentionPlan p = plan_attention(f.batch, f.kv);
  EXPECT_EQ(p.row_seq, (std::vector<int32_t>{-1, -1, 0}));
  EXPECT_EQ(p.table_entries, 1);
}

TEST(AttentionPlan, EmptyBatchHasNoRows) {
  Fixture f({}, {});
  EXPECT_EQ(plan_attention(f.batch, f.kv).rows, 0);
}

TEST(AttentionPlan, InconsistentMetadataIsAnInternalError) {
  EXPECT_EQ(code_of(Fixture({{0, 3, 2, 0}}, {0})), Err::Internal);      // q_len > ctx_len
  EXPECT_EQ(code_of(Fixture({{0, 1, 5, 0}}, {0, 16})), Err::Internal);  // block 16 of 16
  EXPECT_EQ(code_of(Fixture({{0, 1, 5, 0}}, {0, -1})), Err::Internal);  // negative block
  EXPECT_EQ(code_of(Fixture({{0, 2, 2, 0}, {1, 1, 1, 1}}, {0, 1})), Err::Internal);  // row 1 twice
  Fixture gqa({{0, 1, 1, 0}}, {0});
  gqa.batch.num_kv_heads = 3;  // 4 heads do not split over 3 KV heads
  EXPECT_EQ(code_of(gqa), Err::Internal);
}

TEST(AttentionPlan, HeadDimBeyondTheKernelIsReported) {
  Fixture f({{0, 1, 1, 0}}, {0});
  f.batch.head_dim = f.kv.head_dim = 512;
  EXPECT_EQ(code_of(f), Err::ArchUnsupported);
}

}  // namespace
}  // namespace qmpi::cuda
