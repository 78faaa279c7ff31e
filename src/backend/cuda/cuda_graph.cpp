#include "backend/cuda/cuda_graph.h"

#include "backend/cuda/cuda_errors.h"

namespace qmpi::cuda {

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = o.exec_;
    o.exec_ = nullptr;
  }
  return *this;
}

CudaGraph CudaGraph::capture(cudaStream_t stream, const std::function<void()>& enqueue) {
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
             "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    // Ends the capture whatever state it is in, so the stream takes work again.
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  CudaGraph g;
  const cudaError_t rc = cudaGraphInstantiate(&g.exec_, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(rc, "cudaGraphInstantiate");
  return g;
}

void CudaGraph::launch(cudaStream_t stream) const {
  check_cuda(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
}

}  // namespace qmpi::cuda
