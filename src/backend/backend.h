// The Backend seam: buffers plus the handful of ops a Qwen decoder layer needs. The model is
// written once over this interface; CPU (kernels/cpu) and CUDA (kernels/cuda) implement it.
//
// Conventions:
// - Activations are float32, row-major, one row per token, in backend memory. A GEMM's input
//   may also carry a copy in the dtype the backend multiplies in (activation.h, GemmInput), which
//   the model asks the op before to write where gemm_input_dtype says the backend reads one.
// - Weights stay in their checkpoint dtype (BF16/F16/F32) in backend memory: bf16 weights
//   stream half the bytes per token, and compute accumulates in float32.
// - Small metadata arrays (token ids, positions, KV slots, attention sequences, block tables)
//   are passed as HOST pointers; a device backend copies them itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "backend/activation.h"
#include "core/dtype.h"
#include "core/ggml_types.h"
#include "kernels/kernel_types.h"
#include "kernels/lora_segment.h"

namespace qmpi {

class Backend;

// Backend memory, freed by the backend that made it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A weight owned by a backend.
struct Weight {
  Buffer storage;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::shared_ptr<void> prepared;

  WeightView view() const { return {storage.data(), dtype, rows, cols, prepared.get()}; }
  explicit operator bool() const { return static_cast<bool>(storage); }
};

// What a backend may key a recording of a step's device work on (Backend::run_step).
struct StepShape {
  int64_t tokens = 0;       // 0: not to be recorded
  bool decode = false;      // every sequence advances by exactly one token
  int32_t max_context = 0;  // the longest sequence's context, this step's tokens included
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // True when buffers are ordinary host memory (the loader then reads straight into them).
  virtual bool host_memory() const = 0;

  virtual Buffer alloc(size_t bytes) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(void* dst, size_t bytes) = 0;
  // A zeroed buffer; the CPU backend maps large ones lazily (pages cost memory once written).
  virtual Buffer alloc_zeroed(size_t bytes) {
    Buffer b = alloc(bytes);
    fill_zero(b.data(), bytes);
    return b;
  }
  virtual void synchronize() = 0;

  // Creates a weight of the given dtype and shape; `fill` writes its bytes into host memory
  // (directly into the weight on host backends, into a staging buffer on device backends).
  virtual Weight make_weight(DType dtype, int64_t rows, int64_t cols,
                             const std::function<void(void* host_dst)>& fill) = 0;

  // out[i, :] = table[ids[i] - row_offset, :] when that row is in this table, else zeros
  // (vocab-parallel embedding: the TP all-reduce then assembles full rows).
  virtual void embedding(const int32_t* ids, int64_t n, const WeightView& table, int64_t row_offset,
                         float* out) = 0;
  // The same for a GGUF table held in its blocks (model/ggml_weight.h): each row looked up is
  // decoded to float32 as matmul_ggml decodes it, so the table is never held whole in float32.
  virtual void embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table,
                              int64_t row_offset, float* out) = 0;
  // The dtype a float matrix (dense projection, embedding, head, router) of file dtype `file` is
  // held in: the file's, unless the backend would take it through a slower path than the dtype
  // it asks for instead (CpuBackend: F16 becomes BF16 under bf16 activations). The loader rounds
  // to nearest even, as torch does when a float16 checkpoint loads with torch_dtype=bfloat16.
  virtual DType matrix_dtype(DType file) const { return file; }

  // The dtype this backend's dense GEMM reads its input in for a weight of dtype `weight`: F32
  // (x as it is) on the CPU; BF16 for BF16 weights on CUDA, whose tensor-core GEMMs would
  // otherwise round x first. Where it is not F32, the model passes the op that writes the GEMM's
  // input a `rounded` view of that dtype to fill as well, and the GEMM the pair (GemmInput).
  virtual DType gemm_input_dtype(DType weight) const {
    (void)weight;
    return DType::F32;
  }

  // The ops that write a GEMM's input take `rounded`: empty, or a view [n, width] of
  // gemm_input_dtype that they also write, out's values rounded to it (activation.h).

  // out = x * rsqrt(mean(x^2) + eps) * w, per row of width w.cols.
  virtual void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
                       const ActivationView& rounded) = 0;
  // out[n, w.rows] = x[n, w.cols] . w^T (+ bias). bias may be null.
  virtual void matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* bias,
                      float* out) = 0;
  // Several projections of the same input (q/k/v, gate/up; MatmulTarget is in
  // kernels/kernel_types.h): one pass and one barrier where the backend can; the default runs
  // matmul() once per target.
  virtual void matmul_group(const GemmInput& x, int64_t n, std::span<const MatmulTarget> targets) {
    for (const MatmulTarget& t : targets) matmul(x, n, t.w, t.bias, t.out);
  }
  // out[n, w.rows] = x[n, w.in_features] . W^T (+ bias) for an int4 weight (see
  // Int4WeightView), accumulated in float32.
  // The int4 layout matmul_int4 reads; upload_int4 (model/int4_weight.h) lays weights out so.
  virtual Int4Layout int4_layout() const { return Int4Layout::Rows; }
  virtual void matmul_int4(const float* x, int64_t n, const Int4WeightView& w,
                           const WeightView* bias, float* out) = 0;
  // matmul_group for int4 projections of the same input; the default runs matmul_int4() once per
  // target.
  virtual void matmul_int4_group(const float* x, int64_t n, std::span<const Int4Target> targets) {
    for (const Int4Target& t : targets) matmul_int4(x, n, t.w, t.bias, t.out);
  }
  // out[n, w.rows] = x[n, w.cols] . W^T (+ bias) for a block-wise FP8 weight (see
  // Fp8WeightView), accumulated in float32.
  virtual void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                          float* out) = 0;
  // matmul_group for FP8 projections of the same input; the default runs matmul_fp8() once per
  // target.
  virtual void matmul_fp8_group(const float* x, int64_t n, std::span<const Fp8Target> targets) {
    for (const Fp8Target& t : targets) matmul_fp8(x, n, t.w, t.bias, t.out);
  }
  // out[n, w.rows] = x[n, w.cols] . W^T (+ bias) for a GGUF weight of any weight type (see
  // GgmlWeightView), decoded block by block, accumulated in float32.
  virtual void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out) = 0;
  // Rotate-half (NeoX) RoPE in place on x[n, heads, f.head_dim] at positions[n] (host), by
  // the frequencies the model computed (f.rows 1 or n).
  virtual void rope(float* x, int64_t n, int32_t heads, const int32_t* positions,
                    const RopeFreqs& f) = 0;
  // Writes k/v[n, kv_heads, head_dim] into the cache at slots[n] (host).
  virtual void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                        const KvLayerView& kv) = 0;
  // Causal GQA attention of q[rows, heads, head_dim] over the paged cache; out has q's shape.
  virtual void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv,
                         float* out) = 0;
  // out[n, width] = silu(gate) * up
  virtual void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
                        const ActivationView& rounded) = 0;
  // x += y over count elements
  virtual void add(float* x, const float* y, int64_t count) = 0;

  // The residual add and the norm after it in one op: x[n, w.cols] += y, then out = rmsnorm(x).
  // out may be x. A backend overrides it to read and write x once instead of twice.
  virtual void add_rmsnorm(float* x, const float* y, int64_t n, const WeightView& w, float eps,
                           float* out, const ActivationView& rounded) {
    add(x, y, n * w.cols);
    rmsnorm(x, n, w, eps, out, rounded);
  }

  // Copies rows (host indices) of src[*, width] into dst[count, width].
  virtual void gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                           float* dst) = 0;
  // dst[rows[i], :] += scales[i] * src[i, :] for i < count; rows and scales are host arrays and
  // rows are distinct within one call (a token reaches an expert once): the weighted
  // scatter-add that returns an expert's outputs to its tokens' rows.
  virtual void scatter_add_rows(const float* src, const int32_t* rows, const float* scales,
                                int64_t count, int64_t width, float* dst) = 0;

  // The LoRA deltas of the projections that read x [n, in] (model/lora_delta.h): for every
  // segment (kernels/lora_segment.h), out[rows[i], :] += scale * B (A x[rows[i], :]); x and the
  // outputs in backend memory, the segments and their rows on the host. A backend with a fused
  // op runs it and returns true; the default returns false, touching nothing, and the model
  // runs each segment with gather_rows, matmul and scatter_add_rows.
  virtual bool lora_delta(const float* /*x*/, int64_t /*n*/,
                          std::span<const LoraSegment> /*segments*/) {
    return false;
  }

  // Runs task(0) .. task(count - 1), which touch disjoint outputs: the CPU backend spreads them
  // over its threads (each task's own ops then run on the thread that runs it), so many small
  // independent ops (a batched decode's MoE experts) pay one fork/join instead of one each; the
  // default runs them in order.
  virtual void run_tasks(int64_t count, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < count; ++i) task(i);
  }

  // One step's device work, which a backend may record the first times it sees the step's
  // shape and replay afterwards (CUDA graphs, --cuda-graphs). `enqueue` must call only this
  // backend's ops, no comm and nothing that waits for the device, and with the same shape call
  // the same ops on the same buffers with the same sizes: only the contents of the host arrays
  // they take (ids, positions, slots, sequences, block tables) may differ. The default runs it.
  virtual void run_step(const StepShape& shape, const std::function<void()>& enqueue) {
    (void)shape;
    enqueue();
  }

  friend class Buffer;

 protected:
  virtual void release(void* data, size_t bytes) = 0;
};

}  // namespace qmpi
