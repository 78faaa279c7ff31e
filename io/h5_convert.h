// Writes a Hugging Face safetensors folder as one qmpi .h5 checkpoint (docs/hdf5-format.md),
// tensor by tensor and chunk by chunk, so memory stays near two chunks (64 MiB each at most)
// whatever the model's size.
//
// Under MPI every rank of `comm` calls this with the same arguments: the file, its groups,
// datasets and attributes are created collectively (parallel HDF5 requires it), each rank
// writes the data of tensors i % size == rank with independent I/O, and the checksums are
// combined before the collective attribute writes. A failure on one rank raises there; the
// caller must abort the job, since the other ranks wait in the next collective call.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "io/checkpoint_dir.h"

namespace qmpi {

struct H5ConvertOptions {
  std::optional<DType> dtype;  // F32 or BF16: float tensors are cast to it; nullopt keeps them
  int64_t head_dim = 0;        // chunks of attention tensors hold whole heads (h5_layout.h)
  // Files stored as /meta/<name> strings: config.json, generation_config.json, tokenizer files.
  std::vector<std::pair<std::string, std::string>> meta;
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL: one process, no MPI (the POSIX driver)
};

struct H5ConvertSummary {
  size_t tensors = 0;       // in the file
  uint64_t data_bytes = 0;  // tensor bytes in the file
  size_t tensors_here = 0;  // written by this rank
  uint64_t bytes_here = 0;
};

// Writes `out` (through `out`.partial, renamed when complete, so an interrupted conversion
// never leaves a file that looks whole). Throws OutputFile when the file cannot be written.
H5ConvertSummary convert_to_h5(SafetensorsDir& src, const std::string& out,
                               const H5ConvertOptions& opts);

}  // namespace qmpi
