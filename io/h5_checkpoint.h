// A qmpi .h5 checkpoint (layout in docs/hdf5-format.md): every tensor is a dataset
// /weights/<Hugging Face name> with a `dtype` attribute, per-chunk CRC-32s and a whole-tensor
// CRC-32; /meta holds config.json and the tokenizer files as strings; the root carries
// qmpi_format_version.
//
// Each rank opens the file on its own (MPI-IO on MPI_COMM_SELF when MPI runs, else the POSIX
// driver) and reads its slices with independent I/O, one read per chunk: ranks of different
// pipeline stages read different datasets, which rules out collective reads over the world, and
// since `qmpi convert` makes a rank's slice a few whole chunks (each one contiguous run in the
// file), collective reads within a TP group measured no faster (docs/hdf5-format.md).
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/h5_chunk_grid.h"
#include "io/h5_handle.h"
#include "io/weight_source.h"

namespace qmpi {

inline constexpr int64_t kH5FormatVersion = 1;
inline constexpr const char* kH5VersionAttr = "qmpi_format_version";
inline constexpr const char* kH5WeightsGroup = "weights";
inline constexpr const char* kH5MetaGroup = "meta";
inline constexpr const char* kH5DtypeAttr = "dtype";
inline constexpr const char* kH5CrcAttr = "crc32";
inline constexpr const char* kH5ChunkCrcAttr = "chunk_crc32";

// True for paths qmpi treats as HDF5 checkpoints: *.h5 / *.hdf5, or a file with HDF5's signature.
bool is_h5_path(const std::string& path);

struct H5ReadOptions {
  // Check the CRC-32 of every chunk a read touches (reading the rest of chunks the slice only
  // partly covers) and the whole-tensor CRC-32 of whole reads; ChecksumMismatch names the tensor.
  bool verify = false;
};

class H5Weights : public WeightSource {
 public:
  // Throws ModelDirMissing (no such file) and H5Format (not HDF5, truncated, not a qmpi file,
  // another format version, a dataset without a usable dtype).
  explicit H5Weights(const std::string& path, H5ReadOptions opts = {});

  bool has(const std::string& name) const override;
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override { return order_; }
  // Throws TensorMissing, H5Format (unreadable data) and, with verify, ChecksumMismatch.
  void read(const std::string& name, const Slice& slice, void* dst) override;
  uint64_t bytes_read() const override { return bytes_read_.load(); }

 private:
  // --verify: the chunk_crc32 attribute (H5Format when absent or of the wrong length), one
  // chunk's check and the whole-tensor check (ChecksumMismatch).
  std::vector<uint32_t> chunk_checksums(hid_t ds, const TensorInfo& t, int64_t chunks) const;
  void check_chunk(const TensorInfo& t, int64_t index, const Box& chunk, uint32_t crc,
                   const std::vector<uint32_t>& crcs) const;
  void check_whole(hid_t ds, const TensorInfo& t, const uint8_t* data) const;

  std::string path_;
  H5ReadOptions opts_;
  H5File file_;
  std::unordered_map<std::string, TensorInfo> tensors_;
  std::vector<std::string> order_;
  std::atomic<uint64_t> bytes_read_{0};
};

// The text of /meta/<name> (e.g. "config.json"), or nullopt when the file holds none. Throws what
// the H5Weights constructor throws for a missing or damaged file.
std::optional<std::string> read_h5_meta(const std::string& path, const std::string& name);

}  // namespace qmpi
