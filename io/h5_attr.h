// Reading and writing the few attribute shapes qmpi's .h5 files use: strings, integers and
// uint32 arrays. Readers accept what h5py writes too (variable-length strings, int64 numbers).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace qmpi {

// Writers raise Err::OutputFile naming `where` (the file or dataset) and the attribute. Strings
// are written fixed-length: parallel HDF5 cannot write variable-length data.
void write_string_attr(hid_t obj, const char* name, const std::string& value,
                       const std::string& where);
void write_int_attr(hid_t obj, const char* name, int64_t value, const std::string& where);
void write_u32_array_attr(hid_t obj, const char* name, std::span<const uint32_t> values,
                          const std::string& where);

// Readers return nullopt when the attribute is absent and raise Err::H5Format naming `where`
// when it exists with a type that cannot be read as asked.
std::optional<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where);
std::optional<int64_t> read_int_attr(hid_t obj, const char* name, const std::string& where);
std::optional<std::vector<uint32_t>> read_u32_array_attr(hid_t obj, const char* name,
                                                         const std::string& where);

}  // namespace qmpi
