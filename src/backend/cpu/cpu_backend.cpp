#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/host_pages.h"
#include "kernels/cpu/kv_store.h"
#include "kernels/cpu/lora_delta.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_fp8.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/parallel.h"

namespace qmpi {

namespace {

// Buffers from this size on are anonymous mappings: the kernel hands out zeroed pages only as
// they are first touched, so a KV cache sized for a memory budget costs only the blocks its
// sequences have written (alloc_zeroed need not touch them).
constexpr size_t kMappedFrom = size_t(2) << 20;

// The CPU's GEMMs read float32 (gemm_input_dtype), so the model asks its ops for no copy.
void require_no_copy(const ActivationView& rounded, const char* op) {
  if (rounded)
    raise(Err::Internal, std::string("the CPU backend's ") + op +
                             " was given a rounded copy to write, but its GEMMs read float32");
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options) : options_(options) {}

Buffer CpuBackend::alloc(size_t bytes) {
  const std::string fix =
      "Run `qmpi plan` for a layout that spreads the model over more ranks or hosts.";
  if (bytes >= kMappedFrom) {
    void* p = cpu::map_host_pages(bytes);
    if (!p)
      raise(Err::WeightsDoNotFit,
            "could not map " + std::to_string(bytes) + " bytes of host memory", fix);
    return Buffer(this, p, bytes);
  }
  // Round up to whole cache lines: aligned_alloc wants a multiple of the alignment, and a
  // zero-byte buffer still gets a distinct, non-null pointer.
  const size_t rounded =
      std::max<size_t>(1, (bytes + cpu::kCacheLine - 1) / cpu::kCacheLine) * cpu::kCacheLine;
  void* p = std::aligned_alloc(cpu::kCacheLine, rounded);
  if (!p)
    raise(Err::WeightsDoNotFit,
          "could not allocate " + std::to_string(bytes) + " bytes of host memory", fix);
  return Buffer(this, p, bytes);
}

void CpuBackend::release(void* data, size_t bytes) {
  if (bytes >= kMappedFrom)
    cpu::unmap_host_pages(data, bytes);
  else
    std::free(data);
}

void CpuBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  std::memcpy(host_dst, src, bytes);
}

void CpuBackend::fill_zero(void* dst, size_t bytes) {
  std::memset(dst, 0, bytes);
}

Buffer CpuBackend::alloc_zeroed(size_t bytes) {
  Buffer b = alloc(bytes);
  if (bytes < kMappedFrom) fill_zero(b.data(), bytes);  // a fresh mapping reads as zeros
  return b;
}

DType CpuBackend::matrix_dtype(DType file) const {
  return options_.bf16_activations && cpu::kHaveBf16Dot && file == DType::F16 ? DType::BF16 : file;
}

Weight CpuBackend::make_weight(DType dtype, int64_t rows, int64_t cols,
                               const std::function<void(void* host_dst)>& fill) {
  Weight w;
  w.dtype = dtype;
  w.rows = rows;
  w.cols = cols;
  w.storage = alloc(size_t(rows) * size_t(cols) * dtype_size(dtype));
  // Weights are streamed whole every decode step: huge pages spare the TLB (host_pages.h).
  if (w.storage.bytes() >= kMappedFrom) cpu::advise_huge_pages(w.storage.data(), w.storage.bytes());
  fill(w.storage.data());  // host memory: the loader writes the weight in place
  return w;
}

void CpuBackend::embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table,
                                int64_t row_offset, float* out) {
  cpu::embedding_ggml(ids, n, table, row_offset, out, options_.threads);
}

void CpuBackend::embedding(const int32_t* ids, int64_t n, const WeightView& table,
                           int64_t row_offset, float* out) {
  cpu::embedding(ids, n, table, row_offset, out, options_.threads);
}

void CpuBackend::rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
                         const ActivationView& rounded) {
  require_no_copy(rounded, "rmsnorm");
  cpu::rmsnorm(x, n, w, eps, out, options_.threads);
}

void CpuBackend::matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* bias,
                        float* out) {
  cpu::matmul(x.x, n, w, bias, out, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_group(const GemmInput& x, int64_t n,
                              std::span<const MatmulTarget> targets) {
  cpu::matmul_group(x.x, n, targets, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w,
                            const WeightView* bias, float* out) {
  cpu::matmul_fp8(x, n, w, bias, out, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_fp8_group(const float* x, int64_t n, std::span<const Fp8Target> targets) {
  cpu::matmul_fp8_group(x, n, targets, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w,
                             const WeightView* bias, float* out) {
  cpu::matmul_ggml(x, n, w, bias, out, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_int4(const float* x, int64_t n, const Int4WeightView& w,
                             const WeightView* bias, float* out) {
  cpu::matmul_int4(x, n, w, bias, out, {options_.threads, options_.bf16_activations});
}

void CpuBackend::matmul_int4_group(const float* x, int64_t n, std::span<const Int4Target> targets) {
  cpu::matmul_int4_group(x, n, targets, {options_.threads, options_.bf16_activations});
}

void CpuBackend::rope(float* x, int64_t n, int32_t heads, const int32_t* positions,
                      const RopeFreqs& f) {
  if (f.rows != 1) return cpu::rope_per_token(x, n, heads, positions, f, options_.threads);
  if (!rope_ || !rope_->matches(f)) rope_.emplace(f);
  rope_->apply(x, n, heads, positions, options_.threads);
}

void CpuBackend::kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                          const KvLayerView& kv) {
  cpu::kv_store(k, v, n, slots, kv);
}

void CpuBackend::attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv,
                           float* out) {
  cpu::attention(q, batch, kv, out, options_.threads, options_.bf16_activations);
}

void CpuBackend::silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
                          const ActivationView& rounded) {
  require_no_copy(rounded, "silu_mul");
  cpu::silu_mul(gate, up, n, width, out, options_.threads);
}

void CpuBackend::add(float* x, const float* y, int64_t count) {
  cpu::add(x, y, count, options_.threads);
}

void CpuBackend::gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                             float* dst) {
  cpu::gather_rows(src, rows, count, width, dst);
}

void CpuBackend::scatter_add_rows(const float* src, const int32_t* rows, const float* scales,
                                  int64_t count, int64_t width, float* dst) {
  cpu::scatter_add_rows(src, rows, scales, count, width, dst);
}

bool CpuBackend::lora_delta(const float* x, int64_t n, std::span<const LoraSegment> segments) {
  cpu::lora_delta(x, n, segments, options_.threads);
  return true;
}

void CpuBackend::run_tasks(int64_t count, const std::function<void(int64_t)>& task) {
  // Dynamic: tasks differ in size (an expert's share of the tokens). The kernels a task calls
  // open their own parallel regions, which run on the one thread inside this one.
#pragma omp parallel for schedule(dynamic, 1) num_threads(cpu::resolve_threads(options_.threads))
  for (int64_t i = 0; i < count; ++i) task(i);
}

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace qmpi
