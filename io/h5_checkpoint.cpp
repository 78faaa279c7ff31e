#include "io/h5_checkpoint.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/errors.h"
#include "io/checksum.h"
#include "io/h5_attr.h"
#include "io/h5_dtype.h"
#include "io/h5_error.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

constexpr const char* kReconvert = "Recreate it with `qmpi convert --model HF_DIR --out FILE.h5`.";

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// Opens `path` read-only and checks it is a qmpi checkpoint of the version this build reads.
H5File open_checkpoint(const std::string& path) {
  if (!fs::exists(path)) raise(Err::ModelDirMissing, "model path " + path + " does not exist");
  H5Quiet quiet;
  H5Plist fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (mpi_running())
    H5Pset_fapl_mpio(fapl.get(), MPI_COMM_SELF, MPI_INFO_NULL);
  else  // parallel file systems often lack flock, and a reader needs no lock
    H5Pset_file_locking(fapl.get(), false, true);
  H5File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f) {
    const std::string reason = h5_error_reason();
    if (H5Fis_hdf5(path.c_str()) <= 0)
      raise(Err::H5Format, path + " is not an HDF5 file (no HDF5 signature)",
            "Pass a file written by `qmpi convert`, or the Hugging Face model folder.");
    raise(Err::H5Format,
          path + " is an HDF5 file that cannot be opened, probably truncated or damaged (HDF5: " +
              reason + ")",
          "Copy or convert the file again; compare its size with the original.");
  }
  const auto version = read_int_attr(f.get(), kH5VersionAttr, path);
  if (!version)
    raise(Err::H5Format,
          path + " is an HDF5 file but not a qmpi checkpoint: its root has no " +
              std::string(kH5VersionAttr) + " attribute",
          std::string(kReconvert) + " To write one yourself, see docs/hdf5-format.md.");
  if (*version != kH5FormatVersion)
    raise(Err::H5Format,
          path + " has " + kH5VersionAttr + " " + std::to_string(*version) +
              ", but this qmpi reads version " + std::to_string(kH5FormatVersion),
          std::string(kReconvert) + " (with this qmpi), or use the qmpi that wrote it.");
  return f;
}

std::string dataset_path(const std::string& name) {
  return std::string("/") + kH5WeightsGroup + "/" + name;
}

// Every link name in `group`, in creation order when the group tracks it (qmpi convert's
// files), else by name (h5py's default).
std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  hsize_t at = 0;
  if (H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &at, collect, &names) < 0) {
    names.clear();
    at = 0;
    H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &at, collect, &names);
  }
  return names;
}

TensorInfo read_tensor_info(hid_t group, const std::string& name, const std::string& path) {
  const std::string where = path + ":" + dataset_path(name);
  H5O_info_t oi{};
  if (H5Oget_info_by_name2(group, name.c_str(), &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
      oi.type != H5O_TYPE_DATASET)
    raise(Err::H5Format, where + " is not a dataset; /" + std::string(kH5WeightsGroup) +
                             " must hold only tensors");
  H5Dataset ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT));
  H5Type type(H5Dget_type(ds.get()));
  H5Space space(H5Dget_space(ds.get()));
  if (!ds || !type || !space)
    raise(Err::H5Format, where + " cannot be opened (HDF5: " + h5_error_reason() + ")", kReconvert);
  const auto spelled = read_string_attr(ds.get(), kH5DtypeAttr, where);
  if (!spelled)
    raise(Err::H5Format, where + " has no " + std::string(kH5DtypeAttr) + " attribute",
          "Give every tensor dataset a dtype attribute such as \"BF16\" or \"F32\" (see "
          "docs/hdf5-format.md).");
  const auto dtype = parse_dtype(*spelled);
  if (!dtype)
    raise(Err::H5Format, where + " has dtype \"" + *spelled +
                             "\", which is not a safetensors "
                             "dtype name (BF16, F16, F32, ...)");
  if (!h5_type_holds(type.get(), *dtype))
    raise(Err::H5Format,
          where + " says dtype " + *spelled + " but is stored with " +
              std::to_string(H5Tget_size(type.get())) + "-byte elements of another kind",
          "Store BF16/F16 as 16-bit unsigned integers holding the bits, F32 as 32-bit floats "
          "(docs/hdf5-format.md).");
  TensorInfo t;
  t.name = name;
  t.dtype = *dtype;
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  t.shape.assign(dims.begin(), dims.end());
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= uint64_t(d);
  t.nbytes = n * dtype_size(*dtype);
  t.file = path;
  return t;
}

Box slice_box(const std::vector<int64_t>& shape, const Slice& s) {
  Box b{std::vector<int64_t>(shape.size(), 0), shape};
  if (!shape.empty() && s.length >= 0) {
    b.start[size_t(s.dim)] = s.start;
    b.count[size_t(s.dim)] = s.length;
  }
  return b;
}

// Reads `box` of the dataset into dst (row-major over box.count); false on an HDF5 failure.
bool read_box(hid_t ds, const TensorInfo& t, const Box& box, void* dst) {
  if (box.numel() == 0) return true;
  H5Space file_space(H5Dget_space(ds));
  H5Space mem_space;
  if (t.shape.empty()) {
    mem_space = H5Space(H5Screate(H5S_SCALAR));
  } else {
    const std::vector<hsize_t> start(box.start.begin(), box.start.end());
    const std::vector<hsize_t> count(box.count.begin(), box.count.end());
    if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0)
      return false;
    mem_space = H5Space(H5Screate_simple(int(count.size()), count.data(), nullptr));
  }
  return H5Dread(ds, h5_memory_type(t.dtype), mem_space.get(), file_space.get(), H5P_DEFAULT,
                 dst) >= 0;
}

// The dataset's chunk shape, or empty for a contiguous (or compact) dataset.
std::vector<int64_t> chunk_dims(hid_t ds, size_t rank) {
  H5Plist dcpl(H5Dget_create_plist(ds));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return {};
  std::vector<hsize_t> c(rank);
  H5Pget_chunk(dcpl.get(), int(rank), c.data());
  return {c.begin(), c.end()};
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string box_string(const Box& b) {
  std::string s = "[";
  for (size_t d = 0; d < b.start.size(); ++d)
    s += (d ? ", " : "") + std::to_string(b.start[d]) + ":" +
         std::to_string(b.start[d] + b.count[d]);
  return s + "]";
}

}  // namespace

bool is_h5_path(const std::string& path) {
  if (fs::is_directory(path)) return false;
  const auto ext = fs::path(path).extension();
  if (ext == ".h5" || ext == ".hdf5") return true;
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(head, 8) && std::memcmp(head, kSignature, 8) == 0;
}

H5Weights::H5Weights(const std::string& path, H5ReadOptions opts)
    : path_(path), opts_(opts), file_(open_checkpoint(path)) {
  H5Quiet quiet;
  if (H5Lexists(file_.get(), kH5WeightsGroup, H5P_DEFAULT) <= 0)
    raise(Err::H5Format, path + " has no /" + std::string(kH5WeightsGroup) + " group of tensors",
          kReconvert);
  H5Group group(H5Gopen2(file_.get(), kH5WeightsGroup, H5P_DEFAULT));
  for (const std::string& name : link_names(group.get())) {
    tensors_.emplace(name, read_tensor_info(group.get(), name, path));
    order_.push_back(name);
  }
}

bool H5Weights::has(const std::string& name) const {
  return tensors_.count(name) != 0;
}

const TensorInfo& H5Weights::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    raise(Err::TensorMissing,
          "tensor '" + name + "' is not in " + path_ + " (no dataset " + dataset_path(name) + ")",
          "Convert the complete checkpoint again with `qmpi convert`.");
  return it->second;
}

void H5Weights::read(const std::string& name, const Slice& slice, void* dst) {
  const TensorInfo& t = info(name);
  slice_numel(t.shape, slice);  // validates the slice
  const Box box = slice_box(t.shape, slice);
  const size_t esize = dtype_size(t.dtype);
  auto* out = static_cast<uint8_t*>(dst);
  H5Quiet quiet;
  // No chunk cache: each chunk is read once, straight into place.
  H5Plist dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_chunk_cache(dapl.get(), 0, 0, 1.0);
  H5Dataset ds(H5Dopen2(file_.get(), dataset_path(name).c_str(), dapl.get()));
  auto fail = [&](const Box& b) {
    raise(Err::H5Format,
          "cannot read tensor '" + name + "' " + box_string(b) + " from " + path_ +
              " (HDF5: " + h5_error_reason() + ")",
          "The file is damaged or truncated; copy or convert it again.");
  };
  if (!ds) fail(box);
  const ChunkGrid grid(t.shape, chunk_dims(ds.get(), t.shape.size()));
  const std::vector<uint32_t> crcs =
      opts_.verify ? chunk_checksums(ds.get(), t, grid.count()) : std::vector<uint32_t>{};
  // One read per chunk, into place when the chunk's part of the slice is one contiguous run of
  // dst (row chunks), else through `staging` (column chunks: HDF5 would read them row by row).
  std::vector<uint8_t> staging;
  for (int64_t i : grid.overlapping(box)) {
    const Box cb = grid.box(i);
    const Box region = intersect(cb, box);
    // --verify needs all of a chunk the slice only cuts.
    const Box& fetch = opts_.verify && region.count != cb.count ? cb : region;
    uint64_t offset = 0, runs = 0;
    if (&fetch == &region) {
      Box rel = region;
      for (size_t d = 0; d < rel.start.size(); ++d) rel.start[d] -= box.start[d];
      for_each_run(box.count, rel, esize, [&](uint64_t off, uint64_t) {
        if (runs++ == 0) offset = off;
      });
    }
    const uint64_t bytes = uint64_t(fetch.numel()) * esize;
    uint8_t* target = out + offset;
    if (runs != 1) {
      staging.resize(bytes);
      target = staging.data();
    }
    if (!read_box(ds.get(), t, fetch, target)) fail(fetch);
    bytes_read_ += bytes;
    if (opts_.verify) check_chunk(t, i, cb, checksum_crc32(target, bytes), crcs);
    if (runs != 1) copy_region(staging.data(), fetch, out, box, region, esize);
  }
  if (opts_.verify && box.count == t.shape) check_whole(ds.get(), t, out);
}

std::vector<uint32_t> H5Weights::chunk_checksums(hid_t ds, const TensorInfo& t,
                                                 int64_t chunks) const {
  const std::string where = "tensor '" + t.name + "' in " + path_;
  auto crcs = read_u32_array_attr(ds, kH5ChunkCrcAttr, where);
  if (!crcs)
    raise(Err::H5Format,
          where + " has no " + std::string(kH5ChunkCrcAttr) +
              " attribute, so --verify cannot check it",
          "Convert with `qmpi convert` (it writes checksums), or load without --verify.");
  if (int64_t(crcs->size()) != chunks)
    raise(Err::H5Format, where + ": " + kH5ChunkCrcAttr + " holds " + std::to_string(crcs->size()) +
                             " checksums for " + std::to_string(chunks) + " chunks");
  return std::move(*crcs);
}

void H5Weights::check_chunk(const TensorInfo& t, int64_t index, const Box& chunk, uint32_t crc,
                            const std::vector<uint32_t>& crcs) const {
  if (crc != crcs[size_t(index)])
    raise(Err::ChecksumMismatch,
          "tensor '" + t.name + "' in " + path_ + ": chunk " + std::to_string(index) + " " +
              box_string(chunk) + " has CRC-32 " + hex(crc) + " but its " + kH5ChunkCrcAttr +
              " entry is " + hex(crcs[size_t(index)]),
          "The file was damaged after it was written; copy or convert it again.");
}

void H5Weights::check_whole(hid_t ds, const TensorInfo& t, const uint8_t* data) const {
  const std::string where = "tensor '" + t.name + "' in " + path_;
  const auto want = read_int_attr(ds, kH5CrcAttr, where);
  const uint32_t crc = checksum_crc32(data, t.nbytes);
  if (want && uint32_t(*want) != crc)
    raise(Err::ChecksumMismatch,
          where + " has CRC-32 " + hex(crc) + " but its " + kH5CrcAttr + " attribute is " +
              hex(uint32_t(*want)),
          "The file was damaged after it was written; copy or convert it again.");
}

std::optional<std::string> read_h5_meta(const std::string& path, const std::string& name) {
  H5File f = open_checkpoint(path);
  H5Quiet quiet;
  const std::string link = std::string(kH5MetaGroup) + "/" + name;
  if (H5Lexists(f.get(), kH5MetaGroup, H5P_DEFAULT) <= 0 ||
      H5Lexists(f.get(), link.c_str(), H5P_DEFAULT) <= 0)
    return std::nullopt;
  const std::string where = path + ":/" + link;
  H5Dataset ds(H5Dopen2(f.get(), link.c_str(), H5P_DEFAULT));
  H5Type type(H5Dget_type(ds.get()));
  H5Space space(H5Dget_space(ds.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (!ds || !type || n < 0) raise(Err::H5Format, where + " cannot be opened", kReconvert);
  const H5T_class_t cls = H5Tget_class(type.get());
  std::string text;
  bool ok = false;
  if (cls == H5T_STRING && n == 1 && H5Tis_variable_str(type.get()) > 0) {
    H5Type mt(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(type.get()));
    char* p = nullptr;
    ok = H5Dread(ds.get(), mt.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) >= 0;
    if (ok && p) text = p;
    if (p) H5Dvlen_reclaim(mt.get(), space.get(), H5P_DEFAULT, &p);
  } else if (cls == H5T_STRING && n == 1) {
    text.resize(H5Tget_size(type.get()));
    ok = H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) >= 0;
    text.resize(std::min(text.size(), text.find('\0')));
  } else if (cls == H5T_INTEGER && H5Tget_size(type.get()) == 1) {  // raw bytes
    text.resize(size_t(n));
    ok = H5Dread(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) >= 0;
  } else {
    raise(Err::H5Format, where + " is neither a string nor an array of bytes",
          "Store /meta files as one string (docs/hdf5-format.md).");
  }
  if (!ok) raise(Err::H5Format, where + " cannot be read (HDF5: " + h5_error_reason() + ")");
  return text;
}

}  // namespace qmpi
