// cuBLAS, opened the first time a CUDA backend needs it rather than linked. Linking it loads
// cuBLASLt too (cuBLAS is built on it), whose static initialisers take about 0.4 s of CPU at
// every process start: every qmpi command, CPU runs and each of mpirun's ranks included, paid
// that for a library only --backend cuda calls.
#pragma once
#include <cublas_v2.h>

#include <string>

namespace qmpi::cuda {

// The cuBLAS entry points qmpi calls. The names are cublas_v2.h's (cublasCreate is
// cublasCreate_v2 there), so the table follows the header the code is compiled against.
struct CublasLibrary {
  // The C entry point, not the C++ overload that takes a cudaDataType compute type.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSetWorkspace) set_workspace;
  decltype(&cublasSetMathMode) set_math_mode;
  GemmEx gemm_ex;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasGetStatusName) status_name;
};

// Opens libcublas.so.<major of the headers> on the first call (thread-safe) and keeps it open
// for the process; raises the CUDA error, naming the library and the loader's reason, when it
// or one of its entry points is missing.
const CublasLibrary& cublas();

// "libcublas.so.<major>", the file cublas() opens.
const std::string& cublas_soname();

}  // namespace qmpi::cuda
