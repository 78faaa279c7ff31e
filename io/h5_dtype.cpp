#include "io/h5_dtype.h"

namespace qmpi {
namespace {

struct Storage {
  hid_t file;
  hid_t memory;
  H5T_class_t cls;
  H5T_sign_t sign;
};

Storage storage(DType t) {
  switch (t) {
    case DType::F32:
      return {H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, H5T_FLOAT, H5T_SGN_ERROR};
    case DType::F64:
      return {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, H5T_FLOAT, H5T_SGN_ERROR};
    case DType::F16:
    case DType::BF16:
    case DType::U16:
      return {H5T_STD_U16LE, H5T_NATIVE_UINT16, H5T_INTEGER, H5T_SGN_NONE};
    case DType::I64:
      return {H5T_STD_I64LE, H5T_NATIVE_INT64, H5T_INTEGER, H5T_SGN_2};
    case DType::I32:
      return {H5T_STD_I32LE, H5T_NATIVE_INT32, H5T_INTEGER, H5T_SGN_2};
    case DType::I16:
      return {H5T_STD_I16LE, H5T_NATIVE_INT16, H5T_INTEGER, H5T_SGN_2};
    case DType::I8:
      return {H5T_STD_I8LE, H5T_NATIVE_INT8, H5T_INTEGER, H5T_SGN_2};
    case DType::U64:
      return {H5T_STD_U64LE, H5T_NATIVE_UINT64, H5T_INTEGER, H5T_SGN_NONE};
    case DType::U32:
      return {H5T_STD_U32LE, H5T_NATIVE_UINT32, H5T_INTEGER, H5T_SGN_NONE};
    case DType::U8:
    case DType::BOOL:
    case DType::F8_E4M3:
    case DType::F8_E5M2:
      return {H5T_STD_U8LE, H5T_NATIVE_UINT8, H5T_INTEGER, H5T_SGN_NONE};
  }
  return {H5T_STD_U8LE, H5T_NATIVE_UINT8, H5T_INTEGER, H5T_SGN_NONE};
}

}  // namespace

hid_t h5_file_type(DType t) {
  return storage(t).file;
}

hid_t h5_memory_type(DType t) {
  return storage(t).memory;
}

bool h5_type_holds(hid_t type, DType t) {
  const Storage s = storage(t);
  if (H5Tget_class(type) != s.cls || H5Tget_size(type) != dtype_size(t)) return false;
  return s.cls != H5T_INTEGER || H5Tget_sign(type) == s.sign;
}

}  // namespace qmpi
