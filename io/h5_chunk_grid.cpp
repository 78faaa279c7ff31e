#include "io/h5_chunk_grid.h"

#include <algorithm>
#include <cstring>

namespace qmpi {

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  return n;
}

bool Box::contains(const Box& o) const {
  for (size_t d = 0; d < start.size(); ++d)
    if (o.start[d] < start[d] || o.start[d] + o.count[d] > start[d] + count[d]) return false;
  return true;
}

ChunkGrid::ChunkGrid(std::vector<int64_t> shape, std::vector<int64_t> chunk)
    : shape_(std::move(shape)), chunk_(chunk.empty() ? shape_ : std::move(chunk)) {
  for (size_t d = 0; d < shape_.size(); ++d) {
    const int64_t c = std::max<int64_t>(chunk_[d], 1);
    grid_.push_back(shape_[d] == 0 ? 0 : (shape_[d] + c - 1) / c);
    count_ *= grid_.back();
  }
}

Box ChunkGrid::box(int64_t index) const {
  Box b;
  b.start.resize(shape_.size());
  b.count.resize(shape_.size());
  for (size_t d = shape_.size(); d-- > 0;) {
    const int64_t g = index % grid_[d];
    index /= grid_[d];
    b.start[d] = g * chunk_[d];
    b.count[d] = std::min(chunk_[d], shape_[d] - b.start[d]);
  }
  return b;
}

std::vector<int64_t> ChunkGrid::overlapping(const Box& b) const {
  const size_t rank = shape_.size();
  if (b.numel() == 0) return {};
  if (rank == 0) return {0};
  std::vector<int64_t> lo(rank), hi(rank), g(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = b.start[d] / chunk_[d];
    hi[d] = (b.start[d] + b.count[d] - 1) / chunk_[d];
  }
  std::vector<int64_t> out;
  g = lo;
  while (true) {
    int64_t index = 0;
    for (size_t d = 0; d < rank; ++d) index = index * grid_[d] + g[d];
    out.push_back(index);
    size_t d = rank;
    while (d-- > 0) {
      if (++g[d] <= hi[d]) break;
      g[d] = lo[d];
    }
    if (d == size_t(-1)) break;
  }
  return out;
}

void for_each_run(const std::vector<int64_t>& dims, const Box& sub, size_t esize,
                  const std::function<void(uint64_t, uint64_t)>& fn) {
  const size_t rank = dims.size();
  if (sub.numel() == 0) return;
  if (rank == 0) return fn(0, esize);
  // Trailing dimensions the sub-box covers whole merge into one run with the one before them.
  size_t k = rank - 1;
  while (k > 0 && sub.start[k] == 0 && sub.count[k] == dims[k]) --k;
  uint64_t inner = esize;  // bytes of one step along dim k
  for (size_t d = k + 1; d < rank; ++d) inner *= uint64_t(dims[d]);
  const uint64_t run = inner * uint64_t(sub.count[k]);
  std::vector<uint64_t> stride(rank);
  uint64_t s = esize;
  for (size_t d = rank; d-- > 0;) {
    stride[d] = s;
    s *= uint64_t(dims[d]);
  }
  std::vector<int64_t> idx(k, 0);  // position over dims [0, k)
  while (true) {
    uint64_t off = uint64_t(sub.start[k]) * stride[k];
    for (size_t d = 0; d < k; ++d) off += uint64_t(sub.start[d] + idx[d]) * stride[d];
    fn(off, run);
    size_t d = k;
    while (d-- > 0) {
      if (++idx[d] < sub.count[d]) break;
      idx[d] = 0;
    }
    if (d == size_t(-1)) return;
  }
}

Box intersect(const Box& a, const Box& b) {
  Box r;
  for (size_t d = 0; d < a.start.size(); ++d) {
    const int64_t lo = std::max(a.start[d], b.start[d]);
    const int64_t hi = std::min(a.start[d] + a.count[d], b.start[d] + b.count[d]);
    r.start.push_back(lo);
    r.count.push_back(std::max<int64_t>(hi - lo, 0));
  }
  return r;
}

void copy_region(const uint8_t* src, const Box& from, uint8_t* dst, const Box& to,
                 const Box& region, size_t esize) {
  auto relative = [&](const Box& outer) {
    Box r = region;
    for (size_t d = 0; d < r.start.size(); ++d) r.start[d] -= outer.start[d];
    return r;
  };
  std::vector<std::pair<uint64_t, uint64_t>> src_runs;
  for_each_run(from.count, relative(from), esize,
               [&](uint64_t off, uint64_t n) { src_runs.emplace_back(off, n); });
  // Both sides see the same region, so their runs pair up in order; lengths may differ only
  // when one side merges whole rows the other cannot, so copy at the finer granularity.
  size_t i = 0;
  uint64_t used = 0;  // bytes of src_runs[i] already copied
  for_each_run(to.count, relative(to), esize, [&](uint64_t off, uint64_t n) {
    while (n > 0) {
      const uint64_t take = std::min(n, src_runs[i].second - used);
      std::memcpy(dst + off, src + src_runs[i].first + used, take);
      off += take;
      n -= take;
      used += take;
      if (used == src_runs[i].second) {
        ++i;
        used = 0;
      }
    }
  });
}

}  // namespace qmpi
