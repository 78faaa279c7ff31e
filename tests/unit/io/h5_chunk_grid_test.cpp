#include "io/h5_chunk_grid.h"

#include <gtest/gtest.h>

#include <numeric>

namespace qmpi {
namespace {

TEST(ChunkGrid, NumbersChunksRowMajorAndClipsEdges) {
  const ChunkGrid g({10, 6}, {4, 3});  // 3 x 2 chunks
  EXPECT_EQ(g.count(), 6);
  const Box b = g.box(5);  // grid (2, 1)
  EXPECT_EQ(b.start, (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(b.count, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.box(1).start, (std::vector<int64_t>{0, 3}));
  // rows 3..8 of column 4: grid rows 0..2, grid column 1
  EXPECT_EQ(g.overlapping(Box{{3, 4}, {6, 1}}), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(g.overlapping(Box{{0, 0}, {10, 6}}).size(), 6u);
  EXPECT_TRUE(g.overlapping(Box{{0, 0}, {0, 6}}).empty());
}

TEST(ChunkGrid, ContiguousAndScalar) {
  const ChunkGrid whole({5, 5}, {});
  EXPECT_EQ(whole.count(), 1);
  EXPECT_EQ(whole.box(0).count, (std::vector<int64_t>{5, 5}));
  const ChunkGrid scalar({}, {});
  EXPECT_EQ(scalar.count(), 1);
  EXPECT_EQ(scalar.overlapping(Box{}), (std::vector<int64_t>{0}));
}

TEST(ForEachRun, MergesWholeRowsAndStridesColumns) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  auto collect = [&](uint64_t off, uint64_t n) { runs.emplace_back(off, n); };
  for_each_run({4, 6}, Box{{1, 0}, {2, 6}}, 2, collect);  // two whole rows: one run
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{12, 24}}));
  runs.clear();
  for_each_run({4, 6}, Box{{0, 2}, {3, 2}}, 2, collect);  // a column block: one run per row
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{4, 4}, {16, 4}, {28, 4}}));
  runs.clear();
  for_each_run({}, Box{}, 4, collect);
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 4}}));
}

TEST(CopyRegion, MovesTheOverlapBetweenBoxes) {
  // A 6x8 matrix of its flat indexes; `from` holds rows 2..5, `to` wants columns 3..6 of all rows.
  const Box from{{2, 0}, {4, 8}}, to{{0, 3}, {6, 4}};
  std::vector<int32_t> src(32), dst(24, -1);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) src[size_t(r * 8 + c)] = (r + 2) * 8 + c;
  const Box region = intersect(from, to);
  EXPECT_EQ(region.start, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(region.count, (std::vector<int64_t>{4, 4}));
  copy_region(reinterpret_cast<const uint8_t*>(src.data()), from,
              reinterpret_cast<uint8_t*>(dst.data()), to, region, 4);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(dst[size_t(r * 4 + c)], r < 2 ? -1 : r * 8 + c + 3) << r << "," << c;
}

}  // namespace
}  // namespace qmpi
