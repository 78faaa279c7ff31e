// The chunks of a dataset as a regular grid over its shape, numbered row-major over the grid:
// the order of a qmpi dataset's `chunk_crc32` attribute. Chunks at the far edges are clipped to
// the extent, and a chunk's checksum covers exactly its clipped elements in row-major order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace qmpi {

struct Box {
  std::vector<int64_t> start;
  std::vector<int64_t> count;  // empty start/count: the one element of a scalar
  int64_t numel() const;
  bool contains(const Box& other) const;
};

class ChunkGrid {
 public:
  // `chunk` empty: the dataset is contiguous, i.e. one chunk covering it all.
  ChunkGrid(std::vector<int64_t> shape, std::vector<int64_t> chunk);

  int64_t count() const { return count_; }
  Box box(int64_t index) const;
  // Indexes of the chunks `b` touches, ascending.
  std::vector<int64_t> overlapping(const Box& b) const;

 private:
  std::vector<int64_t> shape_, chunk_, grid_;
  int64_t count_ = 1;
};

// Calls fn(byte_offset, bytes) for the contiguous runs, in row-major order, that the sub-box
// (start, count) occupies inside a row-major array of shape `dims` with elements of esize bytes.
void for_each_run(const std::vector<int64_t>& dims, const Box& sub, size_t esize,
                  const std::function<void(uint64_t, uint64_t)>& fn);

// Copies the region `region` (in absolute coordinates) from a buffer holding box `from` to a
// buffer holding box `to`; both buffers are row-major over their box's count.
void copy_region(const uint8_t* src, const Box& from, uint8_t* dst, const Box& to,
                 const Box& region, size_t esize);

// The intersection of two boxes of the same rank (count 0 along a dim when disjoint).
Box intersect(const Box& a, const Box& b);

}  // namespace qmpi
