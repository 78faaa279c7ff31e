#include "backend/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "core/errors.h"

namespace qmpi::cuda {
namespace {

// The exported name behind a cublas_v2.h name, after the header's own #define.
#define QMPI_CUBLAS_SYMBOL_TEXT(name) #name
#define QMPI_CUBLAS_SYMBOL(name) QMPI_CUBLAS_SYMBOL_TEXT(name)

const std::string kSoname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

[[noreturn]] void missing(const std::string& what) {
  raise(Err::CudaError, "the CUDA backend could not open cuBLAS: " + what,
        "Install the CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
            " toolkit's cuBLAS (or put its lib folder on LD_LIBRARY_PATH), or run with --backend "
            "cpu.");
}

template <class F>
void bind(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn) missing(kSoname + " has no " + symbol);
}

CublasLibrary open_cublas() {
  // RTLD_LOCAL: nothing else in the process resolves symbols against it; never closed, since
  // handles made from it live until exit.
  void* lib = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    missing(why ? why : kSoname + " was not found");
  }
  CublasLibrary c{};
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasCreate), c.create);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasDestroy), c.destroy);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasSetStream), c.set_stream);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasSetWorkspace), c.set_workspace);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasSetMathMode), c.set_math_mode);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasGemmEx), c.gemm_ex);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasGetStatusString), c.status_string);
  bind(lib, QMPI_CUBLAS_SYMBOL(cublasGetStatusName), c.status_name);
  return c;
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary lib = open_cublas();
  return lib;
}

const std::string& cublas_soname() {
  return kSoname;
}

}  // namespace qmpi::cuda
