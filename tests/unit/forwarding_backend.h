// A Backend that runs every op on another one (a CPU backend unless given): a test derives from
// it and overrides only the ops it watches, counts or changes.
#pragma once
#include <memory>
#include <utility>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace qmpi::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner = make_cpu_backend(CpuBackendOptions{
                                 1}))
      : inner_(std::move(inner)) {}

  Backend& inner() { return *inner_; }

  std::string_view name() const override { return inner_->name(); }
  bool host_memory() const override { return inner_->host_memory(); }
  // Buffers are the inner backend's (it frees them).
  Buffer alloc(size_t bytes) override { return inner_->alloc(bytes); }
  Buffer alloc_zeroed(size_t bytes) override { return inner_->alloc_zeroed(bytes); }
  void copy_to_device(void* d, const void* s, size_t n) override {
    inner_->copy_to_device(d, s, n);
  }
  void copy_to_host(void* d, const void* s, size_t n) override { inner_->copy_to_host(d, s, n); }
  void fill_zero(void* d, size_t n) override { inner_->fill_zero(d, n); }
  void synchronize() override { inner_->synchronize(); }
  Weight make_weight(DType t, int64_t rows, int64_t cols,
                     const std::function<void(void*)>& fill) override {
    return inner_->make_weight(t, rows, cols, fill);
  }
  void embedding(const int32_t* ids, int64_t n, const WeightView& t, int64_t off,
                 float* out) override {
    inner_->embedding(ids, n, t, off, out);
  }
  void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& t, int64_t off,
                      float* out) override {
    inner_->embedding_ggml(ids, n, t, off, out);
  }
  DType gemm_input_dtype(DType weight) const override { return inner_->gemm_input_dtype(weight); }
  void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
               const ActivationView& rounded) override {
    inner_->rmsnorm(x, n, w, eps, out, rounded);
  }
  void matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* b,
              float* out) override {
    inner_->matmul(x, n, w, b, out);
  }
  void matmul_group(const GemmInput& x, int64_t n, std::span<const MatmulTarget> t) override {
    inner_->matmul_group(x, n, t);
  }
  Int4Layout int4_layout() const override { return inner_->int4_layout(); }
  void matmul_int4(const float* x, int64_t n, const Int4WeightView& w, const WeightView* b,
                   float* out) override {
    inner_->matmul_int4(x, n, w, b, out);
  }
  void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* b,
                  float* out) override {
    inner_->matmul_fp8(x, n, w, b, out);
  }
  void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* b,
                   float* out) override {
    inner_->matmul_ggml(x, n, w, b, out);
  }
  void rope(float* x, int64_t n, int32_t heads, const int32_t* pos, const RopeFreqs& f) override {
    inner_->rope(x, n, heads, pos, f);
  }
  void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                const KvLayerView& kv) override {
    inner_->kv_store(k, v, n, slots, kv);
  }
  void attention(const float* q, const AttentionBatch& b, const KvLayerView& kv,
                 float* out) override {
    inner_->attention(q, b, kv, out);
  }
  void silu_mul(const float* g, const float* u, int64_t n, int64_t w, float* out,
                const ActivationView& rounded) override {
    inner_->silu_mul(g, u, n, w, out, rounded);
  }
  void add(float* x, const float* y, int64_t count) override { inner_->add(x, y, count); }
  void add_rmsnorm(float* x, const float* y, int64_t n, const WeightView& w, float eps, float* out,
                   const ActivationView& rounded) override {
    inner_->add_rmsnorm(x, y, n, w, eps, out, rounded);
  }
  void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                   float* dst) override {
    inner_->gather_rows(src, rows, count, width, dst);
  }
  void scatter_add_rows(const float* src, const int32_t* rows, const float* scales, int64_t count,
                        int64_t width, float* dst) override {
    inner_->scatter_add_rows(src, rows, scales, count, width, dst);
  }
  void run_tasks(int64_t count, const std::function<void(int64_t)>& task) override {
    inner_->run_tasks(count, task);
  }

 protected:
  // Never called: the buffers alloc hands out belong to the inner backend.
  void release(void*, size_t) override {}

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace qmpi::testing
