#include "io/h5_attr.h"

#include "core/errors.h"
#include "io/h5_error.h"
#include "io/h5_handle.h"

namespace qmpi {
namespace {

void write_attr(hid_t obj, const char* name, hid_t file_type, hid_t space, hid_t mem_type,
                const void* data, const std::string& where) {
  H5Quiet quiet;
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5Attr a(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a || H5Awrite(a.get(), mem_type, data) < 0)
    raise(Err::OutputFile, "cannot write attribute " + std::string(name) + " of " + where + ": " +
                               h5_error_reason());
}

// The attribute, or an empty handle when it does not exist.
H5Attr open_attr(hid_t obj, const char* name) {
  H5Quiet quiet;
  if (H5Aexists(obj, name) <= 0) return H5Attr();
  return H5Attr(H5Aopen(obj, name, H5P_DEFAULT));
}

[[noreturn]] void bad_attr(const char* name, const std::string& where, const char* want) {
  raise(Err::H5Format, where + ": attribute " + std::string(name) + " is not " + want);
}

}  // namespace

void write_string_attr(hid_t obj, const char* name, const std::string& value,
                       const std::string& where) {
  H5Type t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), value.empty() ? 1 : value.size());
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  H5Space s(H5Screate(H5S_SCALAR));
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  write_attr(obj, name, t.get(), s.get(), t.get(), padded.data(), where);
}

void write_int_attr(hid_t obj, const char* name, int64_t value, const std::string& where) {
  H5Space s(H5Screate(H5S_SCALAR));
  write_attr(obj, name, H5T_STD_I64LE, s.get(), H5T_NATIVE_INT64, &value, where);
}

void write_u32_array_attr(hid_t obj, const char* name, std::span<const uint32_t> values,
                          const std::string& where) {
  const hsize_t n = values.size();
  H5Space s(H5Screate_simple(1, &n, nullptr));
  write_attr(obj, name, H5T_STD_U32LE, s.get(), H5T_NATIVE_UINT32, values.data(), where);
}

std::optional<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where) {
  H5Attr a = open_attr(obj, name);
  if (!a) return std::nullopt;
  H5Quiet quiet;
  H5Type ft(H5Aget_type(a.get()));
  H5Space s(H5Aget_space(a.get()));
  if (H5Tget_class(ft.get()) != H5T_STRING || H5Sget_simple_extent_npoints(s.get()) != 1)
    bad_attr(name, where, "a string");
  if (H5Tis_variable_str(ft.get()) > 0) {
    H5Type mt(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(ft.get()));
    char* p = nullptr;
    if (H5Aread(a.get(), mt.get(), &p) < 0) bad_attr(name, where, "a readable string");
    std::string v = p ? p : "";
    H5free_memory(p);
    return v;
  }
  const size_t size = H5Tget_size(ft.get());
  std::string v(size, '\0');
  if (H5Aread(a.get(), ft.get(), v.data()) < 0) bad_attr(name, where, "a readable string");
  v.resize(v.find('\0') == std::string::npos ? size : v.find('\0'));
  while (!v.empty() && v.back() == ' ') v.pop_back();  // space-padded strings (Fortran style)
  return v;
}

std::optional<int64_t> read_int_attr(hid_t obj, const char* name, const std::string& where) {
  H5Attr a = open_attr(obj, name);
  if (!a) return std::nullopt;
  H5Quiet quiet;
  H5Type ft(H5Aget_type(a.get()));
  H5Space s(H5Aget_space(a.get()));
  int64_t v = 0;
  if (H5Tget_class(ft.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(s.get()) != 1 ||
      H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0)
    bad_attr(name, where, "one integer");
  return v;
}

std::optional<std::vector<uint32_t>> read_u32_array_attr(hid_t obj, const char* name,
                                                         const std::string& where) {
  H5Attr a = open_attr(obj, name);
  if (!a) return std::nullopt;
  H5Quiet quiet;
  H5Type ft(H5Aget_type(a.get()));
  H5Space s(H5Aget_space(a.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(s.get());
  if (H5Tget_class(ft.get()) != H5T_INTEGER || n < 0) bad_attr(name, where, "an integer array");
  std::vector<uint32_t> v(static_cast<size_t>(n));
  if (n > 0 && H5Aread(a.get(), H5T_NATIVE_UINT32, v.data()) < 0)
    bad_attr(name, where, "an array of uint32 values");
  return v;
}

}  // namespace qmpi
