#include "backend/activation.h"

#include <string>

#include "core/errors.h"

namespace qmpi {

void check_rounded(const ActivationView& v, DType dtype, int64_t rows, int64_t cols,
                   const char* op) {
  if (!v || (v.dtype == dtype && v.rows == rows && v.cols == cols)) return;
  raise(Err::Internal, std::string(op) + " got a rounded copy of " + std::to_string(v.rows) +
                           " x " + std::to_string(v.cols) + " " + std::string(dtype_name(v.dtype)) +
                           " for " + std::to_string(rows) + " x " + std::to_string(cols) + " " +
                           std::string(dtype_name(dtype)));
}

}  // namespace qmpi
