// Checks the parsed EngineConfig and chooses the backend and the TP comm: the only place that
// knows whether the CUDA backend was built.
#include "app/commands/options.h"
#include "backend/cpu/cpu_backend.h"
#include "core/byte_size.h"
#include "core/errors.h"
#include "parallel/launcher.h"
#include "requests/draft_tokenizer.h"
#ifdef QMPI_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/memory_budget.h"
#include "parallel/nccl/comm_nccl.h"
#include "parallel/nccl/comm_staged_mpi.h"
#include "plan/memory_model.h"
#endif

namespace qmpi {
namespace {

#ifdef QMPI_WITH_CUDA
// The KV cache from --gpu-memory-utilization: the workspace is what the profiling step used,
// the overhead the planner's kRuntimeOverheadCuda, so the numbers match `qmpi plan`.
MeasuredMemory size_kv_on_cuda(Backend& backend, const DeviceKvRequest& r,
                               const std::function<void()>& profile_step) {
  auto& cuda = static_cast<CudaBackend&>(backend);  // made by make_cuda_backend below
  cuda.reset_memory_peaks();
  profile_step();
  const cuda::DeviceKvBudget d =
      cuda::plan_kv_blocks_on_device(cuda, r.utilization, r.ranks_per_device, kRuntimeOverheadCuda,
                                     r.bytes_per_block, r.profile_kv_bytes);
  MeasuredMemory m;
  m.device = true;
  m.total_bytes = d.input.total_bytes;
  m.free_bytes = d.input.free_bytes;
  m.weight_bytes = d.input.weight_bytes;
  m.workspace_bytes = d.input.workspace_bytes;
  m.overhead_bytes = d.input.overhead_bytes;
  m.rank_budget_bytes = d.budget.rank_budget_bytes;
  m.limited_by_free = d.budget.limited_by_free;
  m.rank_kv_blocks = d.budget.num_blocks;
  m.bytes_per_block = r.bytes_per_block;
  return m;
}
#endif

// Limits a negative or zero value would turn into nonsense further on (-1 sequences became
// an allocation of 18 EB), refused here with the value as given.
void check_engine_limits(const EngineConfig& c) {
  const auto at_least = [](const char* option, int64_t v, int64_t min) {
    if (v < min)
      raise(Err::Usage, std::string("--") + option + " must be at least " + std::to_string(min) +
                            ", got " + std::to_string(v));
  };
  check_lora_options(c.lora, {});  // serve and batch check the served names too
  const Layout& l = c.parallel.layout;
  if (l.tp < 1 || l.pp < 1 || l.dp < 1) raise(Err::Usage, "--tp, --pp and --dp must be at least 1");
  // run and logits drive one sequence on one mesh: other replicas would only wait, and time out
  // waiting, for a step that never comes.
  const bool scheduled =
      c.command == Command::Batch || c.command == Command::Serve || c.command == Command::Bench;
  if (l.dp > 1 && !scheduled)
    raise(Err::Usage,
          "--dp is for batch, serve and bench; `qmpi " + std::string(command_name(c.command)) +
              "` runs on one mesh",
          "Drop --dp (and launch --tp x --pp ranks), or use qmpi batch, serve or bench.");
  if (c.cache.block_size < 1) raise(Err::Usage, "--block-size must be at least 1");
  at_least("max-num-seqs", c.scheduler.max_num_seqs, 1);
  at_least("max-model-len", c.cache.max_model_len, 0);  // 0: from the model
  at_least("kv-blocks", c.cache.kv_blocks, 0);          // 0: sized from memory
  at_least("threads", c.backend.threads, 0);            // 0: the OpenMP default
  if (!(c.parallel.comm_timeout_s >= 0))
    raise(Err::Usage, "--comm-timeout must be 0 (none) or more seconds");
  if (!(c.cache.gpu_memory_utilization > 0 && c.cache.gpu_memory_utilization <= 1))
    raise(Err::Usage, "--gpu-memory-utilization must be in (0, 1]");
  if (!scheduled) return;
  at_least("max-batched-tokens", c.scheduler.max_batched_tokens, 1);
  if (c.default_max_tokens < 0)
    raise(Err::Usage, "--default-max-tokens must be 0 (OpenAI's defaults) or more, got " +
                          std::to_string(c.default_max_tokens));
  if (c.scheduler.micro_batches < 0)
    raise(Err::Usage, "--micro-batches must be 0 (one per stage) or more");
}

void choose_backend(EngineConfig& c) {
  BackendConfig& b = c.backend;
  if (b.comm != "auto" && b.comm != "mpi" && b.comm != "nccl")
    raise(Err::Usage, "--comm must be auto, mpi or nccl, not '" + b.comm + "'");
  if (b.name == "cpu") {
    if (b.comm == "nccl") raise(Err::Usage, "--comm nccl needs --backend cuda");
    if (b.graphs()) raise(Err::Usage, "--cuda-graphs needs --backend cuda");
    const CpuBackendOptions cpu{b.threads, b.bf16_activations()};
    b.make_backend = [cpu](int) { return make_cpu_backend(cpu); };
  } else if (b.name == "cuda") {
    // cuBLAS multiplies bf16 weights by bf16 activations (gemm.h); an exact float32 path would
    // need the weights widened on the device, which no one has asked for.
    if (b.activations == ActivationDtype::Float32)
      raise(Err::Usage, "--dtype float32 needs --backend cpu",
            "The CUDA backend computes bf16 weights with bf16 activations (--dtype auto, as "
            "vLLM does); float32 checkpoints run in float32 there either way.");
#ifdef QMPI_WITH_CUDA
    c.parallel.cuda = true;
    c.parallel.allow_device_sharing = b.comm == "mpi";
    b.make_backend = [graphs = b.graphs()](int device) {
      return make_cuda_backend(CudaBackendOptions{.device = device, .cuda_graphs = graphs});
    };
    b.size_kv_on_device = size_kv_on_cuda;
    // NCCL by default; --comm mpi stages device buffers through host memory (several ranks
    // may then share one GPU).
    if (b.comm == "mpi")
      b.make_tp_comm = [t = c.parallel.comm_timeout_s](MPI_Comm g, const std::string& label) {
        return make_staged_mpi_comm(g, label, t);
      };
    else
      b.make_tp_comm = make_nccl_comm;
#else
    raise(Err::BackendUnavailable,
          "this qmpi was built without the CUDA backend (no nvcc at build time)");
#endif
  } else {
    raise(Err::Usage, "--backend must be cpu or cuda, not '" + b.name + "'");
  }
}

}  // namespace

void finish_engine_config(EngineConfig& c) {
  check_engine_limits(c);
  choose_backend(c);
  // A draft model of another tokenizer fails before any weight loads (on rank 0, which holds it).
  const std::string& draft = c.scheduler.speculative.model;
  if (!draft.empty() && launcher_rank() == 0) check_draft_tokenizer(c.model.files(), draft);
  c.preflight = launch_preflight;
  c.memory_report = launch_memory_report;
}

}  // namespace qmpi
