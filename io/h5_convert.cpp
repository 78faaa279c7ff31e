#include "io/h5_convert.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/errors.h"
#include "io/checksum.h"
#include "io/h5_attr.h"
#include "io/h5_checkpoint.h"
#include "io/h5_chunk_grid.h"
#include "io/h5_dtype.h"
#include "io/h5_error.h"
#include "io/h5_handle.h"
#include "io/h5_layout.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

struct TensorPlan {
  std::string name;
  DType from;
  DType to;
  std::vector<int64_t> shape;
  std::vector<int64_t> chunk;  // empty: contiguous
  size_t crc_at = 0;           // index of its whole-tensor CRC in the CRC table; chunks follow
};

[[noreturn]] void write_failed(const std::string& what, const std::string& path) {
  raise(Err::OutputFile, "cannot " + what + " in " + path + " (HDF5: " + h5_error_reason() + ")",
        "Check free space and permissions where --out points.");
}

void cast(DType from, const uint8_t* src, DType to, uint8_t* dst, int64_t n) {
  if (from == to) {
    std::memcpy(dst, src, size_t(n) * dtype_size(from));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float f;
    if (from == DType::F32) {
      std::memcpy(&f, src + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      f = from == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    if (to == DType::F32) {
      std::memcpy(dst + 4 * i, &f, 4);
    } else {
      const uint16_t h = f32_to_bf16(f);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

// The mapped source pages of a tensor count towards this process's memory once read; drop them
// (the page cache keeps them) so a 100 GB conversion does not look like it needs 100 GB.
void release_source_pages(const SafetensorsDir& src, const std::string& name) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  for (const SafetensorsFile& shard : src.shards()) {
    const TensorInfo* t = shard.find(name);
    if (!t || t->nbytes == 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(shard.data(name)) & ~(page - 1);
    const auto end =
        (reinterpret_cast<uintptr_t>(shard.data(name)) + t->nbytes + page - 1) & ~(page - 1);
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

// Reads `slice` of a tensor from the source and casts it into out (plan.to).
void read_cast(SafetensorsDir& src, const TensorPlan& t, const Slice& slice,
               std::vector<uint8_t>& staging, uint8_t* out) {
  const int64_t n = slice_numel(t.shape, slice);
  if (t.from == t.to) {
    src.read(t.name, slice, out);
  } else {
    staging.resize(size_t(n) * dtype_size(t.from));
    src.read(t.name, slice, staging.data());
    cast(t.from, staging.data(), t.to, out, n);
  }
  release_source_pages(src, t.name);
}

Slice box_slice(const TensorPlan& t, const Box& b) {
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (b.count[d] != t.shape[d]) return Slice{int(d), b.start[d], b.count[d]};
  return Slice::whole();
}

H5Space box_space(const Box& b, bool scalar) {
  if (scalar) return H5Space(H5Screate(H5S_SCALAR));
  const std::vector<hsize_t> count(b.count.begin(), b.count.end());
  return H5Space(H5Screate_simple(int(count.size()), count.data(), nullptr));
}

// Writes every chunk of one tensor; fills crcs[t.crc_at] (whole) and the chunk CRCs after it.
uint64_t write_tensor(SafetensorsDir& src, const TensorPlan& t, hid_t ds, const std::string& path,
                      std::vector<uint32_t>& crcs) {
  const size_t esize = dtype_size(t.to);
  const bool scalar = t.shape.empty();
  const ChunkGrid grid(t.shape, t.chunk);
  std::vector<uint8_t> buf, staging;
  uint32_t whole = 0;
  bool whole_in_order = true;  // chunks that follow one another in row-major order
  for (int64_t i = 0; i < grid.count(); ++i) {
    const Box b = grid.box(i);
    const Slice s = box_slice(t, b);
    if (!scalar && s.length >= 0 && s.dim != 0) whole_in_order = false;
    buf.resize(size_t(b.numel()) * esize);
    read_cast(src, t, s, staging, buf.data());
    const uint32_t crc = checksum_crc32(buf.data(), buf.size());
    crcs[t.crc_at + 1 + size_t(i)] = crc;
    whole = checksum_crc32(buf.data(), buf.size(), whole);
    H5Space file_space(H5Dget_space(ds));
    if (!scalar) {
      const std::vector<hsize_t> start(b.start.begin(), b.start.end());
      const std::vector<hsize_t> count(b.count.begin(), b.count.end());
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                          nullptr);
    }
    H5Space mem_space = box_space(b, scalar);
    if (H5Dwrite(ds, h5_memory_type(t.to), mem_space.get(), file_space.get(), H5P_DEFAULT,
                 buf.data()) < 0)
      write_failed("write tensor '" + t.name + "'", path);
  }
  if (!whole_in_order) {  // column chunks: the whole-tensor CRC needs the rows in order
    whole = 0;
    const int64_t row_elems = slice_numel(t.shape, Slice::whole()) / t.shape[0];
    const int64_t rows = std::max<int64_t>(1, int64_t(kMaxChunkBytes / (row_elems * esize)));
    for (int64_t r = 0; r < t.shape[0]; r += rows) {
      const Slice s{0, r, std::min(rows, t.shape[0] - r)};
      buf.resize(size_t(s.length * row_elems) * esize);
      read_cast(src, t, s, staging, buf.data());
      whole = checksum_crc32(buf.data(), buf.size(), whole);
    }
  }
  crcs[t.crc_at] = whole;
  return uint64_t(slice_numel(t.shape, Slice::whole())) * esize;
}

void write_meta(hid_t file, const H5ConvertOptions& opts, bool writer, const std::string& path) {
  H5Group meta(H5Gcreate2(file, kH5MetaGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!meta) write_failed("create group /meta", path);
  for (const auto& [name, text] : opts.meta) {
    H5Type type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), std::max<size_t>(text.size(), 1));
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    H5Space space(H5Screate(H5S_SCALAR));
    H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    H5Dataset ds(H5Dcreate2(meta.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                            dcpl.get(), H5P_DEFAULT));
    if (!ds) write_failed("create /meta/" + name, path);
    const char* bytes = text.empty() ? "" : text.data();  // an empty file is one NUL
    if (writer && H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0)
      write_failed("write /meta/" + name, path);
  }
}

}  // namespace

H5ConvertSummary convert_to_h5(SafetensorsDir& src, const std::string& out,
                               const H5ConvertOptions& opts) {
  int rank = 0, size = 1;
  if (opts.comm != MPI_COMM_NULL) {
    MPI_Comm_rank(opts.comm, &rank);
    MPI_Comm_size(opts.comm, &size);
  }
  std::vector<TensorPlan> plans;
  size_t crc_count = 0;
  H5ConvertSummary summary;
  for (const std::string& name : src.names()) {
    const TensorInfo& info = src.info(name);
    TensorPlan t{name, info.dtype, info.dtype, info.shape, {}, crc_count};
    if (opts.dtype && is_float_weight(info.dtype)) t.to = *opts.dtype;
    t.chunk = chunk_shape(t.shape, tp_split(name, opts.head_dim), dtype_size(t.to));
    crc_count += 1 + size_t(ChunkGrid(t.shape, t.chunk).count());
    summary.data_bytes += uint64_t(slice_numel(t.shape, Slice::whole())) * dtype_size(t.to);
    plans.push_back(std::move(t));
  }
  summary.tensors = plans.size();

  const std::string partial = out + ".partial";
  H5Quiet quiet;
  std::vector<uint32_t> crcs(crc_count, 0);
  {
    H5Plist fapl(H5Pcreate(H5P_FILE_ACCESS));
    if (opts.comm != MPI_COMM_NULL) H5Pset_fapl_mpio(fapl.get(), opts.comm, MPI_INFO_NULL);
    // 1.8 object headers store large attributes densely (per-chunk CRC arrays of any length).
    H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    H5File file(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
    if (!file)
      raise(Err::OutputFile, "cannot create " + partial + " (HDF5: " + h5_error_reason() + ")",
            "Check that the folder of --out exists and is writable.");
    write_int_attr(file.get(), kH5VersionAttr, kH5FormatVersion, partial);
    write_meta(file.get(), opts, rank == 0, partial);

    H5Plist gcpl(H5Pcreate(H5P_GROUP_CREATE));
    H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    H5Group weights(H5Gcreate2(file.get(), kH5WeightsGroup, H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
    if (!weights) write_failed("create group /weights", partial);
    std::vector<H5Dataset> datasets;
    for (const TensorPlan& t : plans) {
      const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
      H5Space space(t.shape.empty() ? H5Screate(H5S_SCALAR)
                                    : H5Screate_simple(int(dims.size()), dims.data(), nullptr));
      H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
      if (!t.chunk.empty()) {
        const std::vector<hsize_t> chunk(t.chunk.begin(), t.chunk.end());
        H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data());
      }
      // Every byte gets written, so no fill; early allocation is what parallel HDF5 needs.
      H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
      H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
      H5Dataset ds(H5Dcreate2(weights.get(), t.name.c_str(), h5_file_type(t.to), space.get(),
                              H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
      if (!ds) write_failed("create dataset for tensor '" + t.name + "'", partial);
      write_string_attr(ds.get(), kH5DtypeAttr, std::string(dtype_name(t.to)), partial);
      datasets.push_back(std::move(ds));
    }

    for (size_t i = size_t(rank); i < plans.size(); i += size_t(size)) {
      summary.bytes_here += write_tensor(src, plans[i], datasets[i].get(), partial, crcs);
      summary.tensors_here += 1;
    }
    if (opts.comm != MPI_COMM_NULL)  // each CRC was computed by one rank; the others hold 0
      MPI_Allreduce(MPI_IN_PLACE, crcs.data(), int(crcs.size()), MPI_UINT32_T, MPI_BOR, opts.comm);
    for (size_t i = 0; i < plans.size(); ++i) {
      const auto* c = crcs.data() + plans[i].crc_at;
      const size_t chunks =
          (i + 1 < plans.size() ? plans[i + 1].crc_at : crcs.size()) - plans[i].crc_at - 1;
      write_int_attr(datasets[i].get(), kH5CrcAttr, c[0], partial);
      write_u32_array_attr(datasets[i].get(), kH5ChunkCrcAttr, {c + 1, chunks}, partial);
    }
    datasets.clear();
    weights.reset();
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) write_failed("flush the file", partial);
  }
  if (opts.comm != MPI_COMM_NULL) MPI_Barrier(opts.comm);
  if (rank == 0) {
    std::error_code ec;
    fs::rename(partial, out, ec);
    if (ec) raise(Err::OutputFile, "cannot rename " + partial + " to " + out + ": " + ec.message());
  }
  if (opts.comm != MPI_COMM_NULL) MPI_Barrier(opts.comm);
  return summary;
}

}  // namespace qmpi
