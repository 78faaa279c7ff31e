// HDF5 reports failures on its own error stack and prints it to stderr by default; qmpi turns
// them into catalogue errors instead, quoting HDF5's innermost reason.
#pragma once
#include <string>

namespace qmpi {

// While alive, HDF5 does not print its error stack (restored on destruction).
class H5Quiet {
 public:
  H5Quiet();
  ~H5Quiet();
  H5Quiet(const H5Quiet&) = delete;
  H5Quiet& operator=(const H5Quiet&) = delete;

 private:
  void* func_ = nullptr;
  void* data_ = nullptr;
};

// The most specific message on HDF5's current error stack ("truncated file: eof = ...", "file
// signature not found"), or "" when the stack is empty. Clears the stack.
std::string h5_error_reason();

}  // namespace qmpi
