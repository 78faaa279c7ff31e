// The CPU backend: host memory (64-byte aligned) and the kernels of kernels/cpu, threaded
// with OpenMP.
#pragma once
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "kernels/cpu/rope.h"

namespace qmpi {

struct CpuBackendOptions {
  int threads = 0;  // OpenMP threads per op; 0 = OMP_NUM_THREADS or the core count
  // Round activations to bf16 in matmuls with BF16 weights (`--dtype auto`, the command line's
  // default): VDPBF16PS prefill and batched decode, within the bound of Hugging Face's own bf16
  // run (docs/perf.md). Off (`--dtype float32`, and this struct's default, which the kernel and
  // model tests rely on) keeps exact float32 activations, within ~2e-6 of float64 per matmul.
  // Decode attention over a bf16 or fp8 KV cache follows it (cpu::attention's bf16_decode).
  bool bf16_activations = false;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {});

  const CpuBackendOptions& options() const { return options_; }

  std::string_view name() const override { return "cpu"; }
  bool host_memory() const override { return true; }

  Buffer alloc(size_t bytes) override;
  Buffer alloc_zeroed(size_t bytes) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override {}

  Weight make_weight(DType dtype, int64_t rows, int64_t cols,
                     const std::function<void(void* host_dst)>& fill) override;
  // With bf16 activations and VDPBF16PS, F16 matrices are held as BF16: an AWQ or GPTQ
  // checkpoint's float16 head otherwise ran through the float32 GEMV at ~34 GB/s where a bf16
  // head reads ~50 (Hugging Face's bf16 run casts the same tensors).
  DType matrix_dtype(DType file) const override;

  void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table,
                      int64_t row_offset, float* out) override;
  void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
                 float* out) override;
  void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
               const ActivationView& rounded) override;
  // Multiply x.x: a rounded copy is for backends whose GEMMs read another dtype.
  void matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* bias,
              float* out) override;
  void matmul_group(const GemmInput& x, int64_t n, std::span<const MatmulTarget> targets) override;
  void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                  float* out) override;
  void matmul_fp8_group(const float* x, int64_t n, std::span<const Fp8Target> targets) override;
  void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                   float* out) override;
  void matmul_int4(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                   float* out) override;
  void matmul_int4_group(const float* x, int64_t n, std::span<const Int4Target> targets) override;
  Int4Layout int4_layout() const override { return Int4Layout::Blocks16; }
  void rope(float* x, int64_t n, int32_t heads, const int32_t* positions,
            const RopeFreqs& f) override;
  void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                const KvLayerView& kv) override;
  void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv,
                 float* out) override;
  void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
                const ActivationView& rounded) override;
  void add(float* x, const float* y, int64_t count) override;
  void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                   float* dst) override;
  void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                        int64_t width, float* dst) override;
  bool lora_delta(const float* x, int64_t n, std::span<const LoraSegment> segments) override;
  void run_tasks(int64_t count, const std::function<void(int64_t)>& task) override;

 protected:
  void release(void* data, size_t bytes) override;

 private:
  CpuBackendOptions options_;
  std::optional<cpu::RopeTable> rope_;  // for the shared frequencies last used
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace qmpi
