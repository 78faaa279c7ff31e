#include "io/h5_error.h"

#include <hdf5.h>

namespace qmpi {

H5Quiet::H5Quiet() {
  H5E_auto2_t func = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data_);
  func_ = reinterpret_cast<void*>(func);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

H5Quiet::~H5Quiet() {
  H5Eset_auto2(H5E_DEFAULT, reinterpret_cast<H5E_auto2_t>(func_), data_);
}

std::string h5_error_reason() {
  std::string reason;
  // The stack is walked from the API call inward; the innermost entry says what went wrong.
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason;
}

}  // namespace qmpi
