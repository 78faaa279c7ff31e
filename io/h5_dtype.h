// How each checkpoint dtype is stored in a qmpi .h5 file. HDF5 (and numpy, hence h5py) has no
// bfloat16, so 16-bit floats are stored as their bit patterns in 16-bit unsigned integers and the
// dataset's `dtype` attribute names the float type; every dataset carries that attribute, spelled
// as in safetensors headers ("BF16", "F16", "F32", ...).
#pragma once
#include <hdf5.h>

#include "core/dtype.h"

namespace qmpi {

// The little-endian type a tensor of dtype `t` is written with.
hid_t h5_file_type(DType t);
// The in-memory type reads and writes use (the same bytes as the safetensors encoding on the
// little-endian machines qmpi runs on).
hid_t h5_memory_type(DType t);
// True when a dataset of HDF5 type `type` can hold dtype `t` bit for bit: same class (integer
// for 16-bit floats, booleans and fp8), size and signedness.
bool h5_type_holds(hid_t type, DType t);

}  // namespace qmpi
