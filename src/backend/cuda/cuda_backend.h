// The CUDA backend: activations (float32) and weights (checkpoint dtype) in device memory from
// one cudaMalloc allocator, kernels of kernels/cuda and cuBLAS GEMMs on one stream.
//
// - Host-pointer metadata (ids, positions, slots, block tables) is uploaded into device
//   scratch the backend owns (metadata_mirror.h); an op's host arrays may be reused on return.
// - copy_to_host / copy_to_device / synchronize wait for the stream; every other op only
//   enqueues.
// - Sampling stays on the host: the model copies the logits rows to host memory and the
//   engine's sampler (engine/sampler.h) applies penalties, temperature, top-k/top-p/min-p there.
//   For one row of a 152k vocabulary that is 0.6 MB per token, far below a decode step's cost.
// - bf16 GEMM inputs: gemm_input_dtype asks for bf16 copies for BF16 weights, so rmsnorm,
//   add_rmsnorm and silu_mul write their output rounded to bf16 into the view the model passes,
//   and the matmul the model hands that pair (GemmInput) multiplies the copy instead of
//   converting x again.
// - CUDA graphs (--cuda-graphs): run_step records a decode step's ops as a graph after one eager
//   warm-up of its shape and replays it afterwards; before a replay the step's ops run their host
//   half only (checks, metadata into the pinned staging the graph copies from), launching
//   nothing (graph_book.h, metadata_mirror.h).
// - The stream synchronises with the legacy default stream, on which the NCCL and staged-MPI
//   comms run (parallel/nccl/), so collectives are ordered with the backend's work without events.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/graph_book.h"
#include "backend/cuda/metadata_mirror.h"

namespace qmpi {

struct CudaBackendOptions {
  int device = 0;                                    // index among the visible devices
  size_t cublas_workspace_bytes = size_t(32) << 20;  // cuBLAS's recommendation for Hopper
  // Flash-decoding (launch_shapes.h, attention_split); off runs every attention single-pass,
  // the kernel's behaviour before the split, for side-by-side timings on the device.
  bool split_attention = true;
  // Record decode steps as CUDA graphs and replay them (run_step, graph_book.h).
  bool cuda_graphs = false;
};

// How often run_step recorded, replayed, or ran a recordable step eagerly.
struct GraphCounts {
  int64_t captured = 0;
  int64_t replayed = 0;
  int64_t eager = 0;
};

class CudaBackend final : public Backend {
 public:
  // Raises NoGpu / DriverTooOld / VisibleDevices when the device cannot be used.
  explicit CudaBackend(const CudaBackendOptions& options = {});

  std::string_view name() const override { return "cuda"; }
  bool host_memory() const override { return false; }

  Buffer alloc(size_t bytes) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override;

  Weight make_weight(DType dtype, int64_t rows, int64_t cols,
                     const std::function<void(void* host_dst)>& fill) override;

  void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table,
                      int64_t row_offset, float* out) override;
  void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
                 float* out) override;
  DType gemm_input_dtype(DType weight) const override;
  void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
               const ActivationView& rounded) override;
  void matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* bias,
              float* out) override;
  // Converts x to bf16 once for all the 16-bit weights of a group (q/k/v, gate/up), unless the
  // model passed the copy.
  void matmul_group(const GemmInput& x, int64_t n, std::span<const MatmulTarget> targets) override;
  void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                  float* out) override;
  void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                   float* out) override;
  void matmul_int4(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                   float* out) override;
  void rope(float* x, int64_t n, int32_t heads, const int32_t* positions,
            const RopeFreqs& f) override;
  void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                const KvLayerView& kv) override;
  void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv,
                 float* out) override;
  void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
                const ActivationView& rounded) override;
  void add(float* x, const float* y, int64_t count) override;
  void add_rmsnorm(float* x, const float* y, int64_t n, const WeightView& w, float eps, float* out,
                   const ActivationView& rounded) override;
  void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                   float* dst) override;
  void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                        int64_t width, float* dst) override;
  void run_step(const StepShape& shape, const std::function<void()>& enqueue) override;

  const cuda::CudaDeviceInfo& device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  // Bytes held and their peaks, per purpose (weights, buffers, scratch).
  const cuda::MemoryCounters& memory_counters() const { return allocator_.counters(); }
  void reset_memory_peaks() { allocator_.reset_peaks(); }
  const GraphCounts& graph_counts() const { return graph_counts_; }

 protected:
  void release(void* data, size_t bytes) override;

 private:
  void add_bias(float* out, int64_t n, const WeightView& w, const WeightView* bias);
  // x's rounded copy when it has the weight's dtype (then run_16bit multiplies it), else null.
  const void* rounded_for(const GemmInput& x, int64_t n, const WeightView& w) const;

  // A recorded step's passes: Capture records the ops into a graph, Refresh runs their host
  // half before a replay. Ops that wait for the device refuse both.
  enum class Pass { Eager, Capture, Refresh };
  void capture_step(const cuda::GraphKey& key, const std::function<void()>& enqueue);
  void replay_step(const cuda::GraphKey& key, const std::function<void()>& enqueue);
  void begin_pass(Pass pass);
  void end_pass(bool launched);
  // Nothing was freed since `frees_before` and every metadata upload fit its device array.
  bool pass_fits(uint64_t frees_before);
  // Ends a Capture or Refresh pass: launches `graph` when the pass fits, else runs the step
  // eagerly. True when the graph ran.
  bool launch_if_fits(uint64_t frees_before, const cuda::CudaGraph& graph,
                      const std::function<void()>& enqueue);
  bool refreshing() const { return pass_ == Pass::Refresh; }
  void require_eager(const char* op) const;
  std::array<cuda::MetadataMirror*, 10> mirrors();

  bool split_attention_;
  cuda::CudaDeviceInfo device_;  // selected first: everything below lives on it
  cuda::DeviceAllocator allocator_;
  cuda::CudaStream stream_;
  cuda::Gemm gemm_;
  cuda::PinnedBuffer weight_staging_;
  cuda::MetadataMirror ids_, positions_, slots_, seqs_, row_seq_, tables_, head_map_, rows_,
      scales_, inv_freq_;
  // Flash-decoding partials, sized once for the device's largest split (launch_shapes.h).
  cuda::DeviceArray attention_partials_;
  // int4 matmul scratch: x in packed-input order, and the bf16 weight of the cuBLAS path.
  cuda::DeviceArray int4_x_, int4_w_;
  // fp8 matmul scratch: the weight dequantized to bf16 for cuBLAS.
  cuda::DeviceArray fp8_w_;
  // gguf matmul scratch: the weight dequantized to bf16 for cuBLAS.
  cuda::DeviceArray ggml_w_;
  bool cuda_graphs_;
  cuda::GraphBook graph_book_;
  std::map<cuda::GraphKey, cuda::CudaGraph> graphs_;
  GraphCounts graph_counts_;
  Pass pass_ = Pass::Eager;
  // The context bound attention plans its split for in a recordable step (graph_context), so
  // that its warm-up, its recording and its replays launch the same split; 0 otherwise.
  int32_t step_context_ = 0;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options = {});

}  // namespace qmpi
