// A CUDA graph recorded from a stream and instantiated (RAII over cudaGraphExec_t).
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

namespace qmpi::cuda {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& o) noexcept : exec_(o.exec_) { o.exec_ = nullptr; }
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records what `enqueue` puts on `stream` (nothing runs) and instantiates it. Relaxed capture
  // mode, so that a buffer growing inside enqueue is an allocation rather than an error (the
  // caller then drops the graph, graph_book.h). If enqueue throws, the capture is ended and
  // discarded and the exception passes on; a capture CUDA refuses raises Err::CudaError.
  static CudaGraph capture(cudaStream_t stream, const std::function<void()>& enqueue);
  void launch(cudaStream_t stream) const;

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace qmpi::cuda
