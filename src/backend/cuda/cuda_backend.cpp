#include "backend/cuda/cuda_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

#include "backend/cuda/attention_plan.h"
#include "backend/cuda/cuda_errors.h"
#include "core/errors.h"
#include "kernels/cuda/fp8_launchers.h"
#include "kernels/cuda/ggml_launchers.h"
#include "kernels/cuda/int4_launchers.h"
#include "kernels/cuda/launch_shapes.h"
#include "kernels/cuda/launchers.h"
#include "kernels/ggml_matmul_check.h"
#include "kernels/kv_dtype.h"

namespace qmpi {

using namespace qmpi::cuda;

static_assert(sizeof(AttentionSeq) == sizeof(AttentionSeqDev) &&
                  offsetof(AttentionSeq, q_begin) == offsetof(AttentionSeqDev, q_begin) &&
                  offsetof(AttentionSeq, q_len) == offsetof(AttentionSeqDev, q_len) &&
                  offsetof(AttentionSeq, ctx_len) == offsetof(AttentionSeqDev, ctx_len) &&
                  offsetof(AttentionSeq, table_begin) == offsetof(AttentionSeqDev, table_begin),
              "the attention kernel reads AttentionSeq arrays as AttentionSeqDev");

namespace {

KvPoolsDev pools_of(const KvLayerView& kv) {
  if (!is_kv_dtype(kv.dtype))
    raise(Err::Internal, "a " + std::string(dtype_name(kv.dtype)) + " KV cache");
  return {kv.k, kv.v, kv.k_scale, kv.v_scale, kv.dtype, kv.num_kv_heads, kv.head_dim};
}

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : split_attention_(options.split_attention),
      device_(select_cuda_device(options.device)),
      gemm_(allocator_, stream_.get(), options.cublas_workspace_bytes),
      ids_(allocator_, "token ids"),
      positions_(allocator_, "positions"),
      slots_(allocator_, "KV slots"),
      seqs_(allocator_, "attention sequences"),
      row_seq_(allocator_, "attention rows"),
      tables_(allocator_, "block tables"),
      head_map_(allocator_, "query-to-KV head map"),
      rows_(allocator_, "gathered rows"),
      scales_(allocator_, "row scales"),
      inv_freq_(allocator_, "RoPE frequencies"),
      attention_partials_(allocator_, cuda::MemPurpose::Scratch, "flash-decoding partials"),
      int4_x_(allocator_, cuda::MemPurpose::Scratch, "int4 matmul inputs"),
      int4_w_(allocator_, cuda::MemPurpose::Scratch, "int4 weights dequantized to bf16"),
      fp8_w_(allocator_, cuda::MemPurpose::Scratch, "fp8 weights dequantized to bf16"),
      ggml_w_(allocator_, cuda::MemPurpose::Scratch, "gguf weights dequantized to bf16"),
      cuda_graphs_(options.cuda_graphs) {
  // Reserved now, so the profiling step's workspace peak (memory_budget.h) includes it.
  attention_partials_.reserve(size_t(attention_split_workspace_bytes(device_.multiprocessors)));
  // One per rank: debug, as the start-up summary rank 0 logs has each rank's device and memory.
  spdlog::debug("cuda: device {} {} (sm_{}{}, {} SMs, {:.1f} GiB), driver CUDA {}, runtime {}",
                device_.index, device_.name, device_.major, device_.minor, device_.multiprocessors,
                double(device_.total_bytes) / double(1ull << 30),
                cuda_version_text(device_.driver_version),
                cuda_version_text(device_.runtime_version));
}

Buffer CudaBackend::alloc(size_t bytes) {
  return Buffer(this, allocator_.allocate(bytes, MemPurpose::Buffers, "a backend buffer"), bytes);
}

void CudaBackend::release(void* data, size_t) {
  allocator_.release(data);
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  require_eager("copy_to_device");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_.get()),
             "cudaMemcpyAsync (host to device)");
  stream_.synchronize();
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  require_eager("copy_to_host");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()),
             "cudaMemcpyAsync (device to host)");
  stream_.synchronize();
}

void CudaBackend::fill_zero(void* dst, size_t bytes) {
  require_eager("fill_zero");
  if (bytes == 0) return;
  check_cuda(cudaMemsetAsync(dst, 0, bytes, stream_.get()), "cudaMemsetAsync");
}

void CudaBackend::synchronize() {
  require_eager("synchronize");
  stream_.synchronize();
}

Weight CudaBackend::make_weight(DType dtype, int64_t rows, int64_t cols,
                                const std::function<void(void* host_dst)>& fill) {
  require_eager("make_weight");
  const size_t bytes = size_t(rows) * size_t(cols) * dtype_size(dtype);
  Weight w;
  w.dtype = dtype;
  w.rows = rows;
  w.cols = cols;
  const std::string what = "a " + std::to_string(rows) + " x " + std::to_string(cols) + " " +
                           std::string(dtype_name(dtype)) + " weight";
  w.storage = Buffer(this, allocator_.allocate(bytes, MemPurpose::Weights, what), bytes);
  if (bytes == 0) return w;
  void* host = weight_staging_.reserve(bytes);
  fill(host);
  check_cuda(cudaMemcpyAsync(w.storage.data(), host, bytes, cudaMemcpyHostToDevice, stream_.get()),
             "cudaMemcpyAsync (weight upload)");
  stream_.synchronize();  // the staging memory is reused by the next weight
  return w;
}

void CudaBackend::embedding(const int32_t* ids, int64_t n, const WeightView& table,
                            int64_t row_offset, float* out) {
  const int32_t* d_ids = ids_.upload_i32(ids, n, stream_.get());
  if (refreshing()) return;
  check_cuda(launch_embedding(d_ids, n, table.data, table.dtype, table.rows, table.cols, row_offset,
                              out, stream_.get()),
             "embedding kernel");
}

void CudaBackend::embedding_ggml(const int32_t* ids, int64_t n, const GgmlWeightView& table,
                                 int64_t row_offset, float* out) {
  const GgmlTypeInfo& t = check_ggml_matmul(table, nullptr);
  if (const std::optional<WeightView> dense = ggml_as_dense(table, t))
    return embedding(ids, n, *dense, row_offset, out);
  const int32_t* d_ids = ids_.upload_i32(ids, n, stream_.get());
  if (refreshing()) return;
  const cuda::GgmlDevice d{table.data,      uint32_t(table.type), table.rows,   table.cols,
                           table.row_bytes, t.block_elems,        t.block_bytes};
  check_cuda(cuda::launch_ggml_embedding(d_ids, n, d, row_offset, out, stream_.get()),
             "gguf embedding kernel");
}

DType CudaBackend::gemm_input_dtype(DType weight) const {
  // The copy the norm and silu_mul kernels write is bf16; F16 weights convert x as before.
  return weight == DType::BF16 ? DType::BF16 : DType::F32;
}

void CudaBackend::rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
                          const ActivationView& rounded) {
  check_rounded(rounded, DType::BF16, n, w.cols, "rmsnorm");
  if (refreshing()) return;
  check_cuda(launch_rmsnorm(x, n, w.data, w.dtype, w.cols, eps, out, rounded.data, stream_.get()),
             "rmsnorm kernel");
}

const void* CudaBackend::rounded_for(const GemmInput& x, int64_t n, const WeightView& w) const {
  check_rounded(x.rounded, x.rounded.dtype, n, w.cols, "matmul");
  return x.rounded && x.rounded.dtype == w.dtype ? x.rounded.data : nullptr;
}

void CudaBackend::matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* bias,
                         float* out) {
  const void* x16 = rounded_for(x, n, w);
  if (refreshing()) return;
  if (x16)
    gemm_.run_16bit(x16, n, w, out);
  else
    gemm_.run(x.x, n, w, out);
  add_bias(out, n, w, bias);
}

void CudaBackend::matmul_group(const GemmInput& x, int64_t n,
                               std::span<const MatmulTarget> targets) {
  // Targets of a group share x's width (the Linear seam checks it), so one 16-bit copy of x per
  // 16-bit type serves them all: the one the model passed, or one converted here.
  if (!targets.empty()) check_rounded(x.rounded, x.rounded.dtype, n, targets[0].w.cols, "matmul");
  const void* x16 = x.rounded.data;
  DType x16_type = x16 ? x.rounded.dtype : DType::F32;
  if (refreshing()) return;
  for (const MatmulTarget& t : targets) {
    if (n <= 0 || t.w.rows <= 0) continue;
    if (t.w.dtype != DType::BF16 && t.w.dtype != DType::F16) {
      matmul(x, n, t.w, t.bias, t.out);
      continue;
    }
    if (!x16 || x16_type != t.w.dtype) {
      x16 = gemm_.convert_input(x.x, n, t.w);
      x16_type = t.w.dtype;
    }
    gemm_.run_16bit(x16, n, t.w, t.out);
    add_bias(t.out, n, t.w, t.bias);
  }
}

void CudaBackend::add_bias(float* out, int64_t n, const WeightView& w, const WeightView* bias) {
  if (!bias) return;
  if (bias->rows * bias->cols != w.rows)
    raise(Err::TensorShapeMismatch, "matmul bias has " + std::to_string(bias->rows * bias->cols) +
                                        " elements for a weight with " + std::to_string(w.rows) +
                                        " output rows");
  check_cuda(launch_add_bias(out, n, w.rows, bias->data, bias->dtype, stream_.get()),
             "add_bias kernel");
}

void CudaBackend::matmul_int4(const float* x, int64_t n, const Int4WeightView& w,
                              const WeightView* bias, float* out) {
  if (bias && bias->rows * bias->cols != w.rows)
    raise(Err::TensorShapeMismatch,
          "int4 matmul bias has " + std::to_string(bias->rows * bias->cols) +
              " elements for a weight with " + std::to_string(w.rows) + " output rows");
  // The CUDA kernels read row-major arrays; upload_int4 lays weights out as int4_layout() asks.
  if (w.layout != Int4Layout::Rows)
    raise(Err::Internal, "the CUDA int4 matmul got a weight in the CPU's Blocks16 layout");
  if (n <= 0 || w.rows == 0) return;
  if (refreshing()) return;
  const int64_t kp = w.words * 8;
  auto* xg = static_cast<float*>(int4_x_.reserve(size_t(n * kp) * sizeof(float)));
  check_cuda(cuda::launch_int4_gather(x, n, w.in_features, kp, w.x_index, xg, stream_.get()),
             "int4 gather kernel");
  const cuda::Int4Device d{w.qweight, w.scales, w.zeros, w.group_words, w.rows, w.words, w.groups};
  if (n <= cuda::kInt4GemvMaxRows) {
    check_cuda(cuda::launch_int4_gemv(xg, n, d, out, stream_.get()), "int4 gemv kernel");
  } else {
    // Prefill: the whole weight as bf16 once per call, then the tensor-core GEMM.
    void* wb = int4_w_.reserve(size_t(w.rows * kp) * 2);
    check_cuda(cuda::launch_int4_dequant_bf16(d, wb, stream_.get()), "int4 dequantize kernel");
    gemm_.run(xg, n, WeightView{wb, DType::BF16, w.rows, kp, nullptr}, out);
  }
  if (bias)
    check_cuda(launch_add_bias(out, n, w.rows, bias->data, bias->dtype, stream_.get()),
               "add_bias kernel");
}

void CudaBackend::matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w,
                             const WeightView* bias, float* out) {
  if (n <= 0 || w.rows == 0) return;
  if (refreshing()) return;
  // The weight as bf16 once per call (each e4m3 value times its scale, rounded to bf16), then the
  // GEMM path every bf16 weight takes.
  void* wb = fp8_w_.reserve(size_t(w.rows * w.cols) * 2);
  const cuda::Fp8Device d{w.q,       w.scales,  w.rows,       w.cols,      w.scale_cols,
                          w.block_n, w.block_k, w.row_offset, w.col_offset};
  check_cuda(cuda::launch_fp8_dequant_bf16(d, wb, stream_.get()), "fp8 dequantize kernel");
  const WeightView wv{wb, DType::BF16, w.rows, w.cols, nullptr};
  gemm_.run(x, n, wv, out);
  add_bias(out, n, wv, bias);
}

void CudaBackend::matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w,
                              const WeightView* bias, float* out) {
  const GgmlTypeInfo& t = check_ggml_matmul(w, bias);
  if (n <= 0 || w.rows == 0) return;
  // Plain floats in whole rows are a dense weight: the cuBLAS path serves them as they are.
  if (const std::optional<WeightView> dense = ggml_as_dense(w, t))
    return matmul(x, n, *dense, bias, out);
  if (refreshing()) return;
  const cuda::GgmlDevice d{w.data,      uint32_t(w.type), w.rows,       w.cols,
                           w.row_bytes, t.block_elems,    t.block_bytes};
  if (n <= cuda::kGgmlGemvMaxRows) {
    // Decode: each weight decoded in registers as the GEMV reads it.
    check_cuda(cuda::launch_ggml_gemv(x, n, d, out, stream_.get()), "gguf gemv kernel");
  } else {
    // Prefill: the weight as bf16 once per call, then the GEMM path every bf16 weight takes.
    void* wb = ggml_w_.reserve(size_t(w.rows * w.cols) * 2);
    check_cuda(cuda::launch_ggml_dequant_bf16(d, wb, stream_.get()), "gguf dequantize kernel");
    gemm_.run(x, n, WeightView{wb, DType::BF16, w.rows, w.cols, nullptr}, out);
  }
  if (bias)  // its length checked above
    check_cuda(launch_add_bias(out, n, w.rows, bias->data, bias->dtype, stream_.get()),
               "add_bias kernel");
}

void CudaBackend::rope(float* x, int64_t n, int32_t heads, const int32_t* positions,
                       const RopeFreqs& f) {
  for (int64_t i = 0; i < n; ++i)
    if (positions[i] < 0)
      raise(Err::Internal, "rope got position " + std::to_string(positions[i]) + " for token " +
                               std::to_string(i));
  if (f.head_dim <= 0 || f.head_dim % 2 != 0 || (f.rows != 1 && f.rows != n))
    raise(Err::Internal, "rope got head_dim " + std::to_string(f.head_dim) + " and " +
                             std::to_string(f.rows) + " frequency rows for " + std::to_string(n) +
                             " tokens");
  const int32_t* d_pos = positions_.upload_i32(positions, n, stream_.get());
  const auto* d_inv = static_cast<const float*>(inv_freq_.upload(
      f.inv_freq, size_t(f.rows) * size_t(f.head_dim / 2) * sizeof(float), stream_.get()));
  if (refreshing()) return;
  check_cuda(
      launch_rope(x, n, heads, f.head_dim, d_pos, d_inv, f.rows != 1, f.attention, stream_.get()),
      "rope kernel");
}

void CudaBackend::kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                           const KvLayerView& kv) {
  const int64_t slots_total = kv.num_blocks * kv.block_size;
  for (int64_t i = 0; i < n; ++i)
    if (slots[i] < 0 || slots[i] >= slots_total)
      raise(Err::Internal, "kv_store slot " + std::to_string(slots[i]) + " for token " +
                               std::to_string(i) + " is outside the cache's " +
                               std::to_string(slots_total) + " slots");
  const int32_t* d_slots = slots_.upload_i32(slots, n, stream_.get());
  if (refreshing()) return;
  check_cuda(launch_kv_store(k, v, n, d_slots, pools_of(kv), stream_.get()), "kv_store kernel");
}

void CudaBackend::attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv,
                            float* out) {
  const AttentionPlan plan = plan_attention(batch, kv);
  if (plan.rows == 0) return;
  AttentionParams p;
  p.q = q;
  p.out = out;
  p.cache = pools_of(kv);
  p.seqs = static_cast<const AttentionSeqDev*>(
      seqs_.upload(batch.seqs, size_t(batch.num_seqs) * sizeof(AttentionSeq), stream_.get()));
  p.row_seq = row_seq_.upload_i32(plan.row_seq.data(), plan.rows, stream_.get());
  p.block_tables = tables_.upload_i32(batch.block_tables, plan.table_entries, stream_.get());
  p.kv_head_of =
      head_map_.upload_i32(plan.kv_head_of.data(), int64_t(plan.kv_head_of.size()), stream_.get());
  p.rows = plan.rows;
  p.heads = batch.num_heads;
  p.kv_heads = batch.num_kv_heads;
  p.head_dim = batch.head_dim;
  p.block_size = kv.block_size;
  p.scale = batch.scale;
  // A recordable step plans for its context bound, so all its launches split alike.
  if (step_context_ > 0 && plan.max_keys > step_context_)
    raise(Err::Internal, "attention over " + std::to_string(plan.max_keys) +
                             " keys in a step recorded for " + std::to_string(step_context_));
  const int32_t keys = step_context_ > 0 ? step_context_ : plan.max_keys;
  const AttentionSplit split =
      split_attention_ ? attention_split(plan.rows, batch.num_heads, keys, device_.multiprocessors)
                       : AttentionSplit{1, std::max(keys, 1)};
  p.chunks = split.chunks;
  p.chunk_keys = split.chunk_keys;
  if (split.chunks > 1) {
    const int64_t parts = plan.rows * batch.num_heads * split.chunks;
    auto* base = static_cast<float*>(attention_partials_.data());
    p.partial_out = base;
    p.partial_max = base + parts * kAttentionMaxHeadDim;
    p.partial_sum = p.partial_max + parts;
  }
  if (refreshing()) return;
  check_cuda(launch_attention(p, stream_.get()), "attention kernel");
}

void CudaBackend::silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
                           const ActivationView& rounded) {
  check_rounded(rounded, DType::BF16, n, width, "silu_mul");
  if (refreshing()) return;
  check_cuda(launch_silu_mul(gate, up, n * width, out, rounded.data, stream_.get()),
             "silu_mul kernel");
}

void CudaBackend::add(float* x, const float* y, int64_t count) {
  if (refreshing()) return;
  check_cuda(launch_add(x, y, count, stream_.get()), "add kernel");
}

void CudaBackend::add_rmsnorm(float* x, const float* y, int64_t n, const WeightView& w, float eps,
                              float* out, const ActivationView& rounded) {
  check_rounded(rounded, DType::BF16, n, w.cols, "add_rmsnorm");
  if (refreshing()) return;
  check_cuda(
      launch_add_rmsnorm(x, y, n, w.data, w.dtype, w.cols, eps, out, rounded.data, stream_.get()),
      "add_rmsnorm kernel");
}

void CudaBackend::gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                              float* dst) {
  const int32_t* d_rows = rows_.upload_i32(rows, count, stream_.get());
  if (refreshing()) return;
  check_cuda(launch_gather_rows(src, d_rows, count, width, dst, stream_.get()),
             "gather_rows kernel");
}

void CudaBackend::scatter_add_rows(const float* src, const int32_t* rows, const float* scales,
                                   int64_t count, int64_t width, float* dst) {
  const int32_t* d_rows = rows_.upload_i32(rows, count, stream_.get());
  const auto* d_scales = static_cast<const float*>(
      scales_.upload(scales, size_t(count) * sizeof(float), stream_.get()));
  if (refreshing()) return;
  check_cuda(launch_scatter_add_rows(src, d_rows, d_scales, count, width, dst, stream_.get()),
             "scatter_add_rows kernel");
}

void CudaBackend::run_step(const StepShape& shape, const std::function<void()>& enqueue) {
  const std::optional<GraphKey> key = cuda_graphs_ ? graph_key(shape) : std::nullopt;
  if (!key) return enqueue();
  const GraphDecision d = graph_book_.next(*key, allocator_.frees());
  if (d.drop_all) {
    stream_.synchronize();  // no replay of them still running
    graphs_.clear();
  }
  step_context_ = key->context;
  try {
    if (d.action == GraphAction::Capture) {
      capture_step(*key, enqueue);
    } else if (d.action == GraphAction::Replay) {
      replay_step(*key, enqueue);
    } else {
      graph_counts_.eager++;
      enqueue();
    }
  } catch (...) {
    step_context_ = 0;
    throw;
  }
  step_context_ = 0;
}

void CudaBackend::capture_step(const GraphKey& key, const std::function<void()>& enqueue) {
  const uint64_t frees = allocator_.frees();
  begin_pass(Pass::Capture);
  CudaGraph graph;
  try {
    graph = CudaGraph::capture(stream_.get(), enqueue);
  } catch (const Error& e) {
    end_pass(false);
    graph_book_.refused(key);
    spdlog::warn("cuda graphs: a decode step of {} tokens runs eagerly, it cannot be recorded: {}",
                 key.tokens, e.what());
    graph_counts_.eager++;
    return enqueue();
  } catch (...) {
    end_pass(false);
    throw;
  }
  if (!launch_if_fits(frees, graph, enqueue)) return;
  graphs_.emplace(key, std::move(graph));
  graph_book_.recorded(key);
  graph_counts_.captured++;
}

void CudaBackend::replay_step(const GraphKey& key, const std::function<void()>& enqueue) {
  const uint64_t frees = allocator_.frees();
  begin_pass(Pass::Refresh);
  try {
    enqueue();
  } catch (...) {
    end_pass(false);
    throw;
  }
  if (launch_if_fits(frees, graphs_.at(key), enqueue)) graph_counts_.replayed++;
}

bool CudaBackend::launch_if_fits(uint64_t frees_before, const CudaGraph& graph,
                                 const std::function<void()>& enqueue) {
  if (!pass_fits(frees_before)) {
    // A buffer grew during the pass (launches recorded before it may use the freed one), or a
    // block table outgrew its recorded array: the step runs eagerly, which grows what did not
    // fit, and by that free the book records the shape anew.
    end_pass(false);
    graph_counts_.eager++;
    enqueue();
    return false;
  }
  graph.launch(stream_.get());
  end_pass(true);
  return true;
}

bool CudaBackend::pass_fits(uint64_t frees_before) {
  const auto ms = mirrors();
  return allocator_.frees() == frees_before &&
         std::all_of(ms.begin(), ms.end(), [](const MetadataMirror* m) { return m->fits(); });
}

void CudaBackend::begin_pass(Pass pass) {
  // The mirrors rewrite their pinned staging without waiting for earlier copies out of it; the
  // previous step ended by reading its logits or hidden states, so this wait is normally over.
  stream_.synchronize();
  for (MetadataMirror* m : mirrors())
    m->begin(pass == Pass::Capture ? MirrorMode::Capture : MirrorMode::Refresh);
  pass_ = pass;
}

void CudaBackend::end_pass(bool launched) {
  pass_ = Pass::Eager;
  for (MetadataMirror* m : mirrors()) m->end(launched, stream_.get());
}

void CudaBackend::require_eager(const char* op) const {
  if (pass_ != Pass::Eager)
    raise(Err::Internal, std::string(op) +
                             " waits for the device and cannot be part of a recorded step "
                             "(Backend::run_step)");
}

std::array<MetadataMirror*, 10> CudaBackend::mirrors() {
  return {&ids_,    &positions_, &slots_, &seqs_,   &row_seq_,
          &tables_, &head_map_,  &rows_,  &scales_, &inv_freq_};
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace qmpi
