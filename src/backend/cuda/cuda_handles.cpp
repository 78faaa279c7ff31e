#include "backend/cuda/cuda_handles.h"

#include <string>

#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_errors.h"

namespace qmpi::cuda {

CudaStream::CudaStream() {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreateWithFlags");
}
CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void CudaStream::synchronize() const {
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

CudaEvent::CudaEvent(bool timing) {
  check_cuda(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
             "cudaEventCreateWithFlags");
}
CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}
void CudaEvent::record(cudaStream_t stream) {
  check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord");
}
void CudaEvent::synchronize() const {
  check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize");
}
float CudaEvent::ms_since(const CudaEvent& start) const {
  float ms = 0.0f;
  check_cuda(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime");
  return ms;
}

CublasHandle::CublasHandle(cudaStream_t stream) {
  check_cublas(cublas().create(&handle_), "cublasCreate");
  check_cublas(cublas().set_stream(handle_, stream), "cublasSetStream");
  // Exact float32 GEMMs: TF32 stays off unless a compute type asks for it explicitly.
  check_cublas(cublas().set_math_mode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}
CublasHandle::~CublasHandle() {
  if (handle_) cublas().destroy(handle_);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}
void* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
  check_cuda(cudaMallocHost(&data_, bytes),
             "cudaMallocHost(" + std::to_string(bytes) + " bytes of pinned host memory)");
  capacity_ = bytes;
  return data_;
}

}  // namespace qmpi::cuda
